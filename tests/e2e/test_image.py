"""The operator's OCI image, built here by hack/image/build.sh (hack/test.sh builds it), inspected and run.

The archive is read directly (its config: non-root user, entrypoint, no base image; its layer: exactly
the lock's pins installed). Running it needs a container runtime this machine allows (tests/e2e/image.py
probes podman, then runc on the unpacked image); where none can run, the run tests skip and say why.
Not built: the tests fail when a cluster is required (CI), else skip with the command.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from tests.builders import Job
from tests.unit.test_lock import LOCK, parse_lock

from . import image, kube
from .conftest import ClusterHandle, _cluster_required
from .test_operator import SA_USER, install_crd_and_rbac, reason_of, setup_queue, token_kubeconfig

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = "headlamp-exceeds-max-quota.yaml"
SITE = "opt/kueue-doctor/lib/python3.11/site-packages/"


@pytest.fixture(scope="module")
def archive() -> Path:
    path = image.archive_path()
    if path is not None:
        return path
    msg = f"the image is not built for this source; build it (about 4 minutes cold): cd {ROOT} && bash hack/image/build.sh"
    pytest.fail(msg, pytrace=False) if _cluster_required() else pytest.skip(msg)
    raise AssertionError("unreachable")


@pytest.fixture(scope="module")
def runtime(archive: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[image.Runtime]:
    try:
        rt = image.container_runtime(archive, tmp_path_factory.mktemp("image"))
    except image.Unavailable as exc:
        pytest.skip(str(exc))
    if rt.notes:
        print(f"image runs with {rt.kind}; not with: {'; '.join(rt.notes)}")
    yield rt


def test_image_config_is_non_root_and_runs_the_operator(archive: Path) -> None:
    manifest, config, layers = image.read_archive(archive)
    cfg = config["config"]
    uid, _, gid = cfg["User"].partition(":")
    assert uid.isdigit() and int(uid) != 0 and gid.isdigit(), "numeric non-root user (runAsNonRoot checks a number)"
    assert cfg["Entrypoint"] == ["kueue-doctor"] and cfg["Cmd"] == ["run"]
    env = dict(e.split("=", 1) for e in cfg["Env"])
    assert env["PYTHONDONTWRITEBYTECODE"] == "1" and env["HOME"] == "/tmp", "read-only root: nothing written but /tmp"
    assert env["PATH"].startswith("/opt/kueue-doctor/bin:")
    assert manifest["config"]["mediaType"] == "application/vnd.oci.image.config.v1+json", "an OCI image"
    assert len(layers) == 1, "one layer from the Debian rootfs, no base image"
    assert config["os"] == "linux" and config["architecture"] == "amd64"
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert version is not None
    assert cfg["Labels"]["org.opencontainers.image.version"] == version.group(1)


def test_image_holds_exactly_the_locked_dependencies(archive: Path) -> None:
    _, _, (layer,) = image.read_archive(archive)
    names = image.layer_names(archive, layer, SITE)
    installed = {}
    for name in names:
        dist = re.fullmatch(re.escape(SITE) + r"([^/]+)-([^-/]+)\.dist-info/", name + "/")
        if dist:
            installed[canonicalize_name(dist.group(1))] = dist.group(2)
    locked = {name: str(version) for name, (version, _) in parse_lock(LOCK.read_text()).items()}
    own = installed.pop("kueue-doctor", None)
    assert own is not None, "the project itself is installed"
    for tool in ("pip", "setuptools"):
        assert tool not in installed or tool in locked, f"{tool} is left in the image's venv"
    assert installed == locked, "the image's packages are not the lock's pins"


def test_image_runs_the_engine_compiled(archive: Path) -> None:
    # hack/compiled.sh's wheel: the engine and the state as extension modules beside their sources (an extension
    # module wins the import), so the container's explain below runs the compiled engine
    _, _, (layer,) = image.read_archive(archive)
    names = set(image.layer_names(archive, layer, SITE))
    for module in ("kueue_doctor/engine/diagnose", "kueue_doctor/engine/admission/flavors", "kueue_doctor/state"):
        assert f"{SITE}{module}.cpython-311-x86_64-linux-gnu.so" in names, f"{module} is not compiled in the image"


def test_explain_in_the_container_prints_the_same_verdict(runtime: image.Runtime) -> None:
    t0 = time.monotonic()
    proc = runtime.run(["explain", "-f", f"/examples/{EXAMPLE}"], [image.Mount(ROOT / "examples", "/examples")])
    took = time.monotonic() - t0
    assert proc.returncode == 0, f"{runtime.kind}: {proc.stderr}"
    assert "ExceedsMaxQuota" in proc.stdout and "QueueAdmin" in proc.stdout, proc.stdout
    host = subprocess.run([sys.executable, "-m", "kueue_doctor", "explain", "-f", str(ROOT / "examples" / EXAMPLE)],
                          capture_output=True, text=True, check=True, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT / "operator"), "PATH": "/usr/bin:/bin"})
    assert proc.stdout == host.stdout, "the image answers as this checkout does"
    print(f"explain in the container ({runtime.kind}): {took:.1f}s")


def test_operator_in_the_container_serves_healthz_and_writes_diagnoses(
        runtime: image.Runtime, cluster: ClusterHandle, resources: kube.Resources, namespace: str,
        tmp_path: Path) -> None:
    if cluster.local is None:
        pytest.skip("needs the local control plane (token minting, audit log)")
    install_crd_and_rbac(cluster)
    kubeconfig = token_kubeconfig(cluster, tmp_path)
    kubeconfig.chmod(0o644)  # read by the image's non-root user
    health, metrics = kube.lc.free_ports(2)
    log = tmp_path / "operator-in-image.log"
    args = ["run", "--kubeconfig", "/config/kubeconfig", f"--health-port={health}", f"--metrics-port={metrics}",
            "--namespace", namespace, "--refresh-interval", "2", "--log-format", "text"]
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "kubeconfig").write_bytes(kubeconfig.read_bytes())
    (tmp_path / "config" / "kubeconfig").chmod(0o644)
    (tmp_path / "config").chmod(0o755)
    api = cluster.api_client
    with image.running(runtime, args, [image.Mount(tmp_path / "config", "/config")], log) as proc:
        def tail() -> str:
            return log.read_text(errors="replace")[-3000:]
        kube.wait_serving(proc, f"http://127.0.0.1:{health}/healthz", f"the operator in the image ({runtime.kind})",
                          tail, lambda: None, timeout=90)
        setup_queue(resources, namespace, 2)
        resources.create(Job("big", namespace).queue("main").parallelism(3).request("cpu", "100m").manifest())
        wl = kube.wait_for_workload(api, namespace, "big")["metadata"]["name"]
        kube.wait_for(lambda: reason_of(api, namespace, wl) == "ExceedsMaxQuota", timeout=60,
                      message=lambda: f"the diagnosis from the operator in the image:\n{tail()}")
        assert kube.http_ok(f"http://127.0.0.1:{metrics}/metrics")
    writers = {e["user"]["username"] for e in cluster.writes_by_user(SA_USER)
               if e["objectRef"].get("namespace") == namespace}
    assert writers == {SA_USER}
    assert {e["objectRef"]["resource"] for e in cluster.writes_by_user(SA_USER)
            if e["objectRef"].get("namespace") == namespace} == {"admissiondiagnoses"}
