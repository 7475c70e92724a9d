"""The Kueue family on the real cluster (issue 9): what the ``tests/e2e/test_family_*.py`` modules share.

``owner_kinds`` (behind the module-scoped ``owner_kinds`` fixture of conftest.py) starts the owner controllers a
module names in ``CONTROLLERS`` (JobSet controller, KubeRay operator, Trainer's controller manager, AppWrapper
controller, LeaderWorkerSet controller manager: ``hack/control-plane/controllers.py``) and
restarts Kueue with the module's ``FRAMEWORKS`` (their CRDs installed first), for that module only: the other
tests keep the session's Kueue (frameworks [batch/job]) and no controller runs for them. ``snapshot`` reads back
what the engine reads for these kinds; ``verdict`` diagnoses it, as ``explain -f`` would.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any

from . import kube
from .conftest import ClusterHandle
from .test_owner_scenarios import OWNER_KINDS, _expect_verdict, _owner_snapshot

if str(kube._HACK) not in sys.path:  # pragma: no cover - kube put it there
    sys.path.insert(0, str(kube._HACK))
import controllers as oc

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
POD_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
POD_GROUP_TOTAL = "kueue.x-k8s.io/pod-group-total-count"
IMAGE = "registry.k8s.io/pause:3.10"
#: an image the fake kubelet cannot pull (lc.FAKE_UNPULLABLE_REGISTRY_SUFFIX)
UNPULLABLE_IMAGE = "registry.kueue-doctor.invalid/ray:does-not-exist"
#: the family kinds read back next to _owner_snapshot's (Jobs, Pods, JobSets, Kueue objects, Events, ConfigMap)
FAMILY_KINDS = ("ray.io/RayJob", "ray.io/RayCluster", "ray.io/RayService", "trainer.kubeflow.org/TrainJob",
                "apps/Deployment", "apps/StatefulSet", "workload.codeflare.dev/AppWrapper",
                "leaderworkerset.x-k8s.io/LeaderWorkerSet")


@contextlib.contextmanager
def owner_kinds(cluster: ClusterHandle, controllers: Iterable[str], frameworks: list[str],
                bin_dir: Any) -> Iterator[oc.OwnerControllers | None]:
    """Controllers started (their CRDs first), Kueue restarted on ``frameworks``; all undone at the end."""
    assert cluster.local is not None
    wanted = set(controllers)
    ctl = oc.OwnerControllers(cluster.local, bin_dir) if wanted else None
    t0 = time.monotonic()
    try:
        if ctl is not None and "jobset" in wanted:
            ctl.start_jobset()
        if ctl is not None and "kuberay" in wanted:
            ctl.start_kuberay()
        if ctl is not None and "trainer" in wanted:
            ctl.start_trainer()
        if ctl is not None and "appwrapper" in wanted:
            ctl.start_appwrapper()
        if ctl is not None and "lws" in wanted:
            ctl.start_lws()
        with cluster.kueue_settings(frameworks=list(frameworks)):
            print(f"owner kinds up in {time.monotonic() - t0:.1f}s: controllers {sorted(wanted)} "
                  f"{ctl.timings if ctl else {}}, Kueue frameworks {frameworks}")
            yield ctl
            _release_managed_pods(cluster.api_client)
    finally:
        if ctl is not None:
            ctl.stop()


def _release_managed_pods(api: Any, timeout: float = 30) -> None:
    """Before Kueue loses its pod integration: wait until the Pods it manages (label kueue.x-k8s.io/managed, its
    finalizer) of the tests' deleted namespaces are gone, so no namespace is left Terminating on the finalizer."""
    def left() -> list[dict[str, Any]]:
        return [p for p in kube.list_objects(api, "Pod", label_selector="kueue.x-k8s.io/managed=true")
                if (kube.get(api, "Namespace", p["metadata"]["namespace"]) or {}).get("metadata", {}).get(
                    "deletionTimestamp")]

    deadline = time.monotonic() + timeout
    while left() and time.monotonic() < deadline:
        time.sleep(0.5)
    for pod in left():  # still there: the test harness (admin) lets them go, as Kueue would have
        kube.patch(api, "Pod", pod["metadata"]["name"], {"metadata": {"finalizers": None}},
                   pod["metadata"]["namespace"])


def explain(cluster: ClusterHandle, *args: str) -> subprocess.CompletedProcess[str]:
    """``kueue-doctor explain`` against the live cluster, as a user runs it."""
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "PYTHONPATH": str(kube._HACK.parents[1] / "operator")}
    return subprocess.run([sys.executable, "-m", "kueue_doctor", "explain", *args], env=env, capture_output=True,
                          text=True, timeout=120, check=False)


def _served(api: Any, kind: str) -> bool:
    try:
        kube.request_json(api, "GET", kube.KINDS[kind].collection(None), query={"limit": 1})
    except Exception as exc:
        if getattr(exc, "status", None) == 404:
            return False
        raise
    return True


def snapshot(api: Any, namespaces: Iterable[str]) -> list[dict[str, Any]]:
    """``_owner_snapshot`` + the namespaces' RayJobs, RayClusters, RayServices, TrainJobs, Deployments,
    StatefulSets, AppWrappers and LeaderWorkerSets."""
    namespaces = list(namespaces)
    objects = _owner_snapshot(api, namespaces)
    for kind in FAMILY_KINDS:
        if _served(api, kind):
            for ns in namespaces:
                objects += kube.list_objects(api, kind, ns)
    return objects


def record(name: str, objects: list[dict[str, Any]], note: str) -> None:
    kube.record_fixture(f"scenario-family-{name}", objects, note=note,
                        keep_managed_fields=(*OWNER_KINDS, "ray.io/RayJob", "ray.io/RayCluster",
                                            "ray.io/RayService", "trainer.kubeflow.org/TrainJob",
                                            "workload.codeflare.dev/AppWrapper",
                                            "leaderworkerset.x-k8s.io/LeaderWorkerSet"))


def recorded_verdict(api: Any, namespace: str, name: str, note: str, *, owner: tuple[str, str],
                     reason: str | Iterable[str] | None, cause: str) -> dict[str, Any]:
    """``snapshot`` of the namespace, ``record``ed as scenario-family-<name>, and ``verdict`` on the owner."""
    objects = snapshot(api, [namespace])
    record(name, objects, note)
    return verdict(objects, namespace, owner=owner, reason=reason, cause=cause)


def verdict(objects: list[dict[str, Any]], namespace: str, *, owner: tuple[str, str] | None = None,
            workload: str | None = None, reason: str | Iterable[str] | None, cause: str) -> dict[str, Any]:
    """The engine's status for the owner (or Workload); asserts reason (None: any) and cause."""
    return _expect_verdict(objects, namespace, owner=owner, workload=workload, reason=reason, cause=cause)

