"""Two namespace shards (`--total-shards 2`) on one real control plane, each with its own ServiceAccount and Lease.

Every Workload gets exactly one diagnosis, written only by the shard that owns its namespace (the apiserver's audit
log, by user); a deleted diagnosis is restored by its own shard only; each shard exports the verdicts of its own
namespaces only (sums over both count every Workload once) and says which shard it is.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kueue_doctor.kube.shards import Shard, hex64, plan
from tests.builders import ClusterQueue, Job, LocalQueue, Namespace, ResourceFlavor

from . import kube
from .conftest import ClusterHandle
from .test_failover import RBAC, diagnosis_writes, kill, replica_account, user
from .test_operator import (
    ADIAG,
    SA_NAMESPACE,
    Operator,
    install_crd_and_rbac,
    reason_of,
    start_operator,
    token_kubeconfig,
)

TOTAL = 2
LEASES = [Shard(i, TOTAL).lease("kueue-doctor") for i in range(TOTAL)]
ACCOUNTS = [f"kueue-doctor-shard-{i}" for i in range(TOTAL)]


def shard_lease_role(cluster: ClusterHandle) -> None:
    """What the chart grants a sharded release: get and update on each shard's Lease (create is by kind)."""
    api = cluster.api_client
    kube.request_json(api, "PATCH", f"{RBAC}/namespaces/{SA_NAMESPACE}/roles/kueue-doctor-shard-leases", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "kueue-doctor-shard-leases", "namespace": SA_NAMESPACE},
        "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
                  {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": LEASES,
                   "verbs": ["get", "update"]}]},
        query={"fieldManager": "e2e", "force": "true"}, content_type="application/apply-patch+yaml")
    for name in ACCOUNTS:
        replica_account(cluster, name, lease=False)
        kube.request_json(api, "PATCH", f"{RBAC}/namespaces/{SA_NAMESPACE}/rolebindings/{name}-leases", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": f"{name}-leases", "namespace": SA_NAMESPACE},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": SA_NAMESPACE}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kueue-doctor-shard-leases"}},
            query={"fieldManager": "e2e", "force": "true"}, content_type="application/apply-patch+yaml")


def namespaces_of_both_shards(per_shard: int) -> list[str]:
    """Fresh namespace names, `per_shard` of them owned by each shard."""
    found: dict[int, list[str]] = {i: [] for i in range(TOTAL)}
    while any(len(v) < per_shard for v in found.values()):
        name = kube.unique_name("t-shard")
        owner = Shard(0, TOTAL).of(name)
        if len(found[owner]) < per_shard:
            found[owner].append(name)
    return [ns for i in range(TOTAL) for ns in found[i]]


@pytest.fixture
def shards(cluster: ClusterHandle, tmp_path: Path) -> Iterator[list[Operator]]:
    if cluster.local is None:
        pytest.skip("needs the local control plane (token minting, audit log)")
    install_crd_and_rbac(cluster)
    shard_lease_role(cluster)
    started: list[Operator] = []
    yield started
    for op in started:
        if op.proc.poll() is None:
            kill(op)
    for name in LEASES:
        path = f"/apis/coordination.k8s.io/v1/namespaces/{SA_NAMESPACE}/leases/{name}"
        try:
            kube.request_json(cluster.api_client, "DELETE", path)
        except Exception as exc:
            if getattr(exc, "status", None) != 404:
                raise


def workloads_exported(op: Operator) -> float:
    """The Workloads this replica counts in kueue_doctor_workloads (over every ClusterQueue, stage and reason)."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in op.metrics().splitlines()
               if line.startswith("kueue_doctor_workloads{"))


def diagnosis_events(op: Operator) -> float:
    """AdmissionDiagnosis watch events this replica received (kept or, another shard's, dropped)."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in op.metrics().splitlines()
               if line.startswith('kueue_doctor_watch_events_total{kind="AdmissionDiagnosis"}'))


def waiting_jobs(cluster: ClusterHandle, resources: kube.Resources, namespaces: list[str]) -> dict[str, str]:
    """In each namespace a LocalQueue and a Job that never fits its ClusterQueue: namespace -> its Workload."""
    suffix = kube.unique_name("sh")
    rf, cq = f"rf-{suffix}", f"cq-{suffix}"
    resources.create(ResourceFlavor(rf).manifest())
    resources.create(ClusterQueue(cq).quotas({rf: {"cpu": "100m", "pods": "1"}}).manifest())
    for ns in namespaces:
        resources.create(Namespace(ns).manifest())
        resources.create(LocalQueue("main", ns, cq).manifest())
        resources.create(Job("big", ns).queue("main").parallelism(2).request("cpu", "100m").manifest())
    return {ns: kube.wait_for_workload(cluster.api_client, ns, "big")["metadata"]["name"] for ns in namespaces}


def start_shards(cluster: ClusterHandle, tmp_path: Path, shards: list[Operator], workloads: dict[str, str],
                 *flags: str) -> None:
    """Both shards, scoped to the test's namespaces, until every Workload has its diagnosis."""
    api = cluster.api_client
    started = time.monotonic()
    scope = [arg for ns in workloads for arg in ("-n", ns)]
    for index, account in enumerate(ACCOUNTS):
        shards.append(start_operator(token_kubeconfig(cluster, tmp_path, account), tmp_path, *scope,
                                     "--log-format=json", f"--total-shards={TOTAL}", f"--shard-index={index}",
                                     "--leader-elect", f"--leader-elect-resource-namespace={SA_NAMESPACE}", *flags))
    kube.wait_for(lambda: all(reason_of(api, ns, wl) for ns, wl in workloads.items()),
                  timeout=90, message=lambda: f"every Workload diagnosed, got "
                  f"{ {ns: reason_of(api, ns, wl) for ns, wl in workloads.items()} }:\n"
                  + "\n".join(op.tail() for op in shards))
    print(f"both shards started and every Workload diagnosed in {time.monotonic() - started:.1f}s")


def quiet(shards: list[Operator]) -> bool:
    """No AdmissionDiagnosis watch event reached any shard for a second."""
    before = [diagnosis_events(op) for op in shards]
    time.sleep(1)
    return before == [diagnosis_events(op) for op in shards]


def restore_deleted(cluster: ClusterHandle, shards: list[Operator], owner: int, namespace: str, workload: str
                    ) -> list[float]:
    """Delete the diagnosis of `workload`, wait until shard `owner` has restored it and the other shard has had
    time to see it too; the AdmissionDiagnosis watch events each shard received meanwhile."""
    api = cluster.api_client
    kube.wait_for(lambda: quiet(shards), timeout=30, message="the shards' watches settle")
    before = [diagnosis_events(op) for op in shards]
    since = time.time()
    kube.request_json(api, "DELETE", f"{ADIAG}/namespaces/{namespace}/admissiondiagnoses/{workload}")
    kube.wait_for(lambda: reason_of(api, namespace, workload), timeout=60,
                  message=lambda: f"the deleted diagnosis restored:\n{shards[owner].tail()}")
    restores = [w for w in diagnosis_writes(cluster, user(ACCOUNTS[owner]), namespace, since - 1, workload)
                if w.get("verb") in ("create", "patch", "update")]
    assert restores, f"shard {owner} did not restore its diagnosis"
    time.sleep(2)  # the other shard's watch had its chance to deliver the same events
    assert not diagnosis_writes(cluster, user(ACCOUNTS[1 - owner]), namespace)
    return [diagnosis_events(op) - b for op, b in zip(shards, before, strict=True)]


def test_two_shards_each_write_only_their_own_namespaces_diagnoses_and_restore_only_those(
        cluster: ClusterHandle, resources: kube.Resources, tmp_path: Path, shards: list[Operator]) -> None:
    api = cluster.api_client
    namespaces = namespaces_of_both_shards(2)
    workloads = waiting_jobs(cluster, resources, namespaces)
    start_shards(cluster, tmp_path, shards, workloads)

    # each shard leads on its own Lease
    for index, name in enumerate(LEASES):
        lease = kube.request_json(api, "GET", f"/apis/coordination.k8s.io/v1/namespaces/{SA_NAMESPACE}/leases/{name}")
        assert lease["spec"]["holderIdentity"], (index, lease)

    # exactly one writer per namespace: its shard's
    for ns in namespaces:
        owner = Shard(0, TOTAL).of(ns)
        assert diagnosis_writes(cluster, user(ACCOUNTS[owner]), ns), f"shard {owner} wrote nothing in {ns}"
        assert not diagnosis_writes(cluster, user(ACCOUNTS[1 - owner]), ns), (
            f"shard {1 - owner} wrote in {ns}, which shard {owner} owns")

    # metrics: each shard exports its own namespaces' Workloads and says which shard it is
    for index, op in enumerate(shards):
        text = op.metrics()
        assert f'kueue_doctor_shard_info{{shard="{index}",total="{TOTAL}"}} 1.0' in text
        assert workloads_exported(op) == 2, text  # 2 of the 4 namespaces, one Workload each

    # a deleted diagnosis is restored by its own shard, and only by it; hash modulo N is filtered client-side:
    # the other shard still receives (and drops) its deletion and re-creation
    victim = next(ns for ns in namespaces if Shard(0, TOTAL).of(ns) == 1)
    received = restore_deleted(cluster, shards, 1, victim, workloads[victim])
    assert received[0] >= 2 and received[1] >= 2, received

    # a resync of either shard (every 15 s here) never deletes the other's diagnoses: wait one out
    deadline = time.monotonic() + 17
    while time.monotonic() < deadline:
        assert all(reason_of(api, ns, wl) for ns, wl in workloads.items())
        time.sleep(1)
    writers: dict[str, Any] = {ns: {w["user"]["username"] for w in cluster.writes_by_user(user(ACCOUNTS[0]))
                                    + cluster.writes_by_user(user(ACCOUNTS[1]))
                                    if w["objectRef"].get("namespace") == ns
                                    and w["objectRef"].get("resource") == "admissiondiagnoses"}
                               for ns in namespaces}
    assert all(len(v) == 1 for v in writers.values()), writers


def test_ranged_shards_are_sent_only_their_own_namespaces_diagnoses(
        cluster: ClusterHandle, resources: kube.Resources, tmp_path: Path, shards: list[Operator]) -> None:
    """--shard-boundaries (as `kueue-doctor shard-plan` prints them): where the apiserver serves KEP-5866 (the
    local one runs with ShardedListAndWatch on), it narrows each shard's watches and LISTs of Events, owners and
    AdmissionDiagnoses to the shard's own namespaces; one writer per namespace still."""
    api = cluster.api_client
    namespaces = [kube.unique_name("t-range") for _ in range(4)]
    cuts = plan({ns: 1 for ns in namespaces}, TOTAL)
    ranged = [Shard(i, TOTAL, cuts) for i in range(TOTAL)]
    assert [sum(1 for ns in namespaces if s.owns(ns)) for s in ranged] == [2, 2]
    probe = kube.request_json(api, "GET", "/api/v1/namespaces/default/configmaps",
                              query={"shardSelector": ranged[0].selector or ""})
    assert "shardInfo" in probe["metadata"], "this apiserver does not serve KEP-5866: the test proves nothing"

    workloads = waiting_jobs(cluster, resources, namespaces)
    start_shards(cluster, tmp_path, shards, workloads, "--shard-boundaries=" + ",".join(hex64(c) for c in cuts))
    for ns in namespaces:
        owner = next(s.index for s in ranged if s.owns(ns))
        assert diagnosis_writes(cluster, user(ACCOUNTS[owner]), ns), f"shard {owner} wrote nothing in {ns}"
        assert not diagnosis_writes(cluster, user(ACCOUNTS[1 - owner]), ns), f"shard {1 - owner} wrote in {ns}"
    for op in shards:
        assert workloads_exported(op) == 2, op.metrics()
        assert "the apiserver is asked to send only its own namespaces'" in op.log.read_text(), op.tail()

    victim = next(ns for ns in namespaces if ranged[1].owns(ns))
    received = restore_deleted(cluster, shards, 1, victim, workloads[victim])
    assert received[1] >= 2 and received[0] == 0, f"AdmissionDiagnosis events received by each shard: {received}"
