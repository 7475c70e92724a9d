"""pytest wiring for the end-to-end tests: one real control plane with Kueue per session.

Which cluster:
* ``KUEUE_DOCTOR_E2E_KUBECONFIG=<path>``: use that existing cluster (nothing is started, no
  audit log). Kueue must already run there. A fake kubelet thread is still started for Nodes
  labelled ``kueue-doctor.local/fake-node=true`` (set ``KUEUE_DOCTOR_E2E_FAKE_KUBELET=0`` to
  skip it), so tests that create fake nodes behave the same.
* otherwise a :class:`LocalCluster` from ``hack/control-plane`` is started once per session, with
  the binaries built by ``bash hack/control-plane/build.sh`` (never built from here).

When the binaries are missing: ``pytest.fail`` if a cluster is required, else ``pytest.skip``.
A cluster is required when ``KUEUE_DOCTOR_REQUIRE_CLUSTER=1``, or when ``CI=true`` and
``KUEUE_DOCTOR_REQUIRE_CLUSTER`` is not ``0``. A start that fails although the binaries are
present always fails loudly (with the failing component's last log lines): that is a bug or a
broken machine, never a reason to skip.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.builders import Namespace

from . import kube
from .kube import Resources, lc
from .kueue_reasons import kueue_reasons  # noqa: F401  (the fixture: both of Kueue's reason wordings)

E2E_DIR = Path(__file__).resolve().parent


def _cluster_required() -> bool:
    flag = os.environ.get("KUEUE_DOCTOR_REQUIRE_CLUSTER")
    if flag is not None:
        return flag == "1"
    return os.environ.get("CI", "").lower() == "true"


def built_tool(script: Path, what: str, cold: str) -> str:
    """The last line `bash <script> --print-if-built` prints (a tool built into the cache outside the tree); when it
    is not built: fail if a cluster is required (CI builds it first), else skip saying how to build it."""
    proc = subprocess.run(["bash", str(script), "--print-if-built"], capture_output=True, text=True, check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        msg = f"no {what}: {proc.stderr.strip()}\nBuild it first ({cold}): bash {script}"
        if _cluster_required():
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    return proc.stdout.strip().splitlines()[-1]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if E2E_DIR in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.e2e)


@dataclass
class ClusterHandle:
    """What tests get from the ``cluster`` fixture."""

    kubeconfig: Path
    api_client: Any
    audit_log: Path | None
    local: lc.LocalCluster | None = None
    fake_kubelet: lc.FakeKubelet | None = None
    external: bool = False
    admin_user: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def create_node(self, name: str, **kwargs: Any) -> dict[str, Any]:
        """A fake Node (Ready; cpu/memory/pods/labels/taints/extra_capacity/unschedulable)."""
        return lc.create_fake_node(self.api_client, name, **kwargs)

    def delete_node(self, name: str) -> None:
        kube.delete(self.api_client, "Node", name)

    def writes_by_user(self, username: str) -> list[dict[str, Any]]:
        if self.local is None:
            pytest.skip(
                "no audit log: the tests run against an external cluster (KUEUE_DOCTOR_E2E_KUBECONFIG)"
            )
        return self.local.writes_by_user(username)

    def check_alive(self) -> None:
        if self.local is not None:
            self.local.check_alive()
        if self.fake_kubelet is not None and not self.fake_kubelet.is_alive():
            raise lc.ControlPlaneError("the fake kubelet thread stopped")

    @contextlib.contextmanager
    def kueue_settings(self, **changes: Any) -> Iterator[lc.KueueSettings]:
        """Run the block with Kueue restarted on changed ``KueueSettings`` fields; restart it on the
        session's settings afterwards (each restart: a few seconds). Local cluster only."""
        if self.local is None:
            pytest.skip("restarting Kueue with other settings needs the local cluster")
        base = self.local.kueue
        changed = dataclasses.replace(base, **changes)
        self.local.restart_kueue(changed)
        try:
            yield changed
        finally:
            self.local.restart_kueue(base)

    def make_user_kubeconfig(self, user: str, groups: tuple[str, ...] = ()) -> Path:
        if self.local is None:
            pytest.skip("client certificates can only be minted for the local cluster")
        return self.local.make_user_kubeconfig(user, groups)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterHandle]:
    external = os.environ.get("KUEUE_DOCTOR_E2E_KUBECONFIG")
    if external:
        api = lc.new_api_client(external)
        fk = None
        if os.environ.get("KUEUE_DOCTOR_E2E_FAKE_KUBELET", "1") != "0":
            log = tmp_path_factory.mktemp("fake-kubelet") / "fake-kubelet.log"
            fk = lc.FakeKubelet(Path(external), log)
            fk.start()
        handle = ClusterHandle(Path(external), api, None, fake_kubelet=fk, external=True)
        try:
            yield handle
        finally:
            if fk is not None:
                fk.stop()
                fk.join(timeout=5)
            api.close()
        return

    try:
        bin_dir = lc.find_bin_dir()
    except lc.BinariesNotBuilt as exc:
        msg = f"no local control plane: {exc}"
        if _cluster_required():
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    workdir = tmp_path_factory.mktemp("control-plane")
    local = lc.LocalCluster(workdir, bin_dir=bin_dir)
    try:
        local.start()
    except lc.ControlPlaneError as exc:
        pytest.fail(f"the local control plane did not start (workdir {workdir}):\n{exc}", pytrace=False)
    api = local.api_client()
    try:
        yield ClusterHandle(
            local.kubeconfig,
            api,
            local.audit_log,
            local=local,
            admin_user=local.admin_user,
            extra={"timings": local.timings},
        )
    finally:
        api.close()
        local.stop()


@pytest.fixture(autouse=True)
def _cluster_still_alive(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail with the component's logs, before and after a test, if a control-plane process died."""
    if "cluster" not in request.fixturenames:
        yield
        return
    handle: ClusterHandle = request.getfixturevalue("cluster")
    handle.check_alive()
    yield
    handle.check_alive()


@pytest.fixture
def resources(cluster: ClusterHandle) -> Iterator[Resources]:
    """Creates objects for one test; deletes them in Kueue's order afterwards."""
    res = Resources(cluster.api_client)
    try:
        yield res
    finally:
        res.cleanup()


@pytest.fixture
def namespace(request: pytest.FixtureRequest, resources: Resources) -> str:
    """A fresh namespace named after the test (deleted after the test)."""
    name = kube.unique_name("t-" + request.node.name.removeprefix("test_")[:40])
    resources.create(Namespace(name).manifest())
    return name


@pytest.fixture
def pod_namespace(request: pytest.FixtureRequest, resources: Resources, owner_kinds: Any) -> str:
    """A fresh namespace in which Kueue's pod webhook acts (labelled ``lc.POD_INTEGRATION_LABEL``), for the family
    modules whose owners run through Kueue's pod-based integrations (test_family_pods.py, test_family_lws.py)."""
    name = kube.unique_name("t-" + request.node.name.removeprefix("test_")[:40])
    resources.create(Namespace(name).label(lc.POD_INTEGRATION_LABEL, "true").manifest())
    return name


@pytest.fixture(scope="module")
def owner_kinds(request: pytest.FixtureRequest, cluster: ClusterHandle) -> Iterator[Any]:
    """For one tests/e2e/test_family_*.py module: its ``CONTROLLERS`` (jobset, kuberay) started and Kueue restarted
    on its ``FRAMEWORKS``; undone after the module (see tests/e2e/families.py). Local cluster only."""
    from . import families

    if cluster.local is None:
        pytest.skip("the owner controllers are started next to the local cluster's Kueue")
    controllers = tuple(getattr(request.module, "CONTROLLERS", ()))
    bin_dir = None
    if controllers:
        try:
            bin_dir = families.oc.find_controllers_bin_dir()
        except lc.BinariesNotBuilt as exc:
            if _cluster_required():
                pytest.fail(f"no owner controllers: {exc}", pytrace=False)
            pytest.skip(f"no owner controllers: {exc}")
    with families.owner_kinds(cluster, controllers, list(request.module.FRAMEWORKS), bin_dir) as ctl:
        yield ctl


@pytest.fixture
def control_plane_faults(cluster: ClusterHandle) -> Any:
    """Restart single components of the local cluster, compact etcd, start a second empty apiserver
    (hack/control-plane/component_faults.py); local cluster only."""
    if cluster.local is None:
        pytest.skip("component faults need the local control plane")
    import component_faults  # on sys.path with localcluster (tests/e2e/kube.py)

    return component_faults.Faults(cluster.local)
