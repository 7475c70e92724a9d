"""MultiKueue on two local control planes (issue 9): the worker cluster and the manager's MultiKueue objects.

The session's cluster is the manager. ``worker_cluster`` starts a second :class:`LocalCluster` on 127.0.0.1 (its own
etcd, kube-apiserver, KCM, scheduler, Kueue and fake kubelet: the dispatched Job runs there) and gives the kubeconfig
the manager's Kueue reads from a Secret in its namespace (embedded CA and client certificate, as Kueue's
kubeconfig validation requires). ``MultiKueueSetup`` makes, for one test, the Secret, the MultiKueueCluster, the
MultiKueueConfig, the AdmissionCheck (controllerName ``kueue.x-k8s.io/multikueue``) and a ClusterQueue using it on
the manager, and the same-named ClusterQueue/LocalQueue on the worker. The manager's Kueue runs on the release's
``multiKueue`` defaults (the MultiKueue feature gate is Beta and on in v0.19.2; gcInterval 1m, origin multikueue,
workerLostTimeout 15m): no restart is needed.
"""

from __future__ import annotations

import base64
import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.builders import ClusterQueue, LocalQueue, Namespace, ResourceFlavor

from . import kube
from .kube import Resources, condition, condition_is, lc, wait_for

MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
POOL_LABEL = "kueue-doctor.test/pool"
#: the worker's user for the manager's Kueue (its client certificate, in system:masters)
MANAGER_USER = "multikueue-manager"


@dataclass
class Worker:
    cluster: lc.LocalCluster
    api: Any
    #: the kubeconfig the manager's Secret holds (the worker's apiserver)
    kubeconfig: str
    start_seconds: float


@contextlib.contextmanager
def worker_cluster(workdir: Path, bin_dir: Path) -> Iterator[Worker]:
    t0 = time.monotonic()
    cluster = lc.LocalCluster(workdir, bin_dir=bin_dir, jobset_crd=False)
    cluster.start()
    try:
        seconds = round(time.monotonic() - t0, 1)
        kubeconfig = cluster.make_user_kubeconfig(MANAGER_USER, ("system:masters",)).read_text()
        api = cluster.api_client()
        print(f"MultiKueue worker up in {seconds}s at {cluster.api_url} (timings {cluster.timings})")
        try:
            yield Worker(cluster, api, kubeconfig, seconds)
        finally:
            api.close()
    finally:
        cluster.stop()


def unreachable_kubeconfig(worker: Worker) -> str:
    """The worker's kubeconfig with the server moved to a loopback port nobody listens on (a stopped apiserver)."""
    port = lc.free_ports(1)[0]
    return worker.kubeconfig.replace(worker.cluster.api_url, f"https://127.0.0.1:{port}")


def insecure_kubeconfig(worker: Worker) -> str:
    """The worker's kubeconfig told to skip TLS verification, which Kueue's kubeconfig validation refuses."""
    doc = yaml.safe_load(worker.kubeconfig)
    cluster = doc["clusters"][0]["cluster"]
    cluster.pop("certificate-authority-data")
    cluster["insecure-skip-tls-verify"] = True
    return str(yaml.safe_dump(doc, sort_keys=False))


@dataclass
class MultiKueueSetup:
    """One test's MultiKueue objects (all names unique)."""

    cluster: str  # the MultiKueueCluster
    config: str  # the MultiKueueConfig
    check: str  # the AdmissionCheck
    cq: str  # the ClusterQueue, same name on both clusters
    lq: str  # the LocalQueue, same name in the namespace on both clusters
    flavor: str


def setup(manager: Resources, worker: Resources, namespace: str, *, kubeconfig: str | None, manager_cpu: str,
          worker_cpu: str, worker_node_cpu: str | None = None) -> MultiKueueSetup:
    """The manager's Secret -> MultiKueueCluster -> MultiKueueConfig -> AdmissionCheck -> ClusterQueue, the worker's
    namespace and queues; a fake Node on the worker when ``worker_node_cpu`` (the Job's Pods run there). No Secret
    when ``kubeconfig`` is None (the MultiKueueCluster names one that does not exist)."""
    worker.create(Namespace(namespace).manifest())
    pool = kube.unique_name("pool")
    flavor = kube.unique_name("rf")
    cq = kube.unique_name("cq")
    if worker_node_cpu:
        worker.node(kube.unique_name("worker-node"), labels={POOL_LABEL: pool}, cpu=worker_node_cpu, memory="8Gi")
    worker.create(ResourceFlavor(flavor).node_labels({POOL_LABEL: pool}).manifest())
    worker.create(ClusterQueue(cq).quotas({flavor: {"cpu": worker_cpu}}).manifest())
    worker.create(LocalQueue("main", namespace, cq).manifest())

    name = kube.unique_name("worker")
    secret = f"{name}-kubeconfig"
    if kubeconfig is not None:
        manager.create({"apiVersion": "v1", "kind": "Secret",
                        "metadata": {"name": secret, "namespace": lc.KUEUE_NAMESPACE},
                        "data": {"kubeconfig": base64.b64encode(kubeconfig.encode()).decode()}})
    kv = {"apiVersion": kube.KUEUE_API_VERSION}
    manager.create({**kv, "kind": "MultiKueueCluster", "metadata": {"name": name},
                    "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": secret}}}})
    config = kube.unique_name("mkconfig")
    manager.create({**kv, "kind": "MultiKueueConfig", "metadata": {"name": config}, "spec": {"clusters": [name]}})
    check = kube.unique_name("multikueue")
    manager.create({**kv, "kind": "AdmissionCheck", "metadata": {"name": check},
                    "spec": {"controllerName": MULTIKUEUE_CONTROLLER, "parameters": {
                        "apiGroup": kube.KUEUE_GROUP, "kind": "MultiKueueConfig", "name": config}}})
    manager.create(ResourceFlavor(flavor).manifest())
    manager.create(ClusterQueue(cq).quotas({flavor: {"cpu": manager_cpu}}).admission_check(check).manifest())
    manager.create(LocalQueue("main", namespace, cq).manifest())
    return MultiKueueSetup(name, config, check, cq, "main", flavor)


def submit(api: Any, manager: Resources, namespace: str, s: MultiKueueSetup, job: dict[str, Any]) -> dict[str, Any]:
    """Create ``job`` on the manager once Kueue's queue manager knows the LocalQueue; assert the webhook gave it
    ``spec.managedBy`` MultiKueue. Kueue's job webhook defaults managedBy only when its in-memory queue manager maps
    the LocalQueue to a ClusterQueue with a MultiKueue check; a Job created before that (the LocalQueue just made)
    stays unmanaged and its check is Rejected "Expecting spec.managedBy ...". The LocalQueue's Active condition
    (True or False) is written after the queue manager has it."""
    wait_for(lambda: condition(kube.get(api, "LocalQueue", s.lq, namespace), "Active"), timeout=60,
             message=f"LocalQueue {namespace}/{s.lq} reconciled by Kueue (an Active condition)")
    created = manager.create(job)
    assert created["spec"].get("managedBy") == MULTIKUEUE_CONTROLLER, (
        f"Kueue's webhook did not hand Job {namespace}/{created['metadata']['name']} to MultiKueue: "
        f"spec.managedBy={created['spec'].get('managedBy')!r}")
    return created


def wait_active(api: Any, kind: str, name: str, status: str = "True", timeout: float = 60) -> dict[str, Any]:
    """The object once its Active condition has ``status``."""
    last: dict[str, Any] = {}

    def check() -> dict[str, Any] | None:
        obj = kube.get(api, kind, name)
        last["o"] = obj
        return obj if obj is not None and condition_is(obj, "Active", status) else None

    return wait_for(check, timeout=timeout, message=lambda: f"{kind} {name} Active={status}; last "
                    f"{condition(last.get('o'), 'Active')}")
