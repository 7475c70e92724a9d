"""Two operator processes at once, on the real control plane: one leads (a Lease), one stands by warm.

Each process has its own ServiceAccount (bound to the roles of manifests/base/rbac.yaml, the Lease Role
included), so the apiserver's audit log tells which replica wrote what. Measured here and quoted in
docs/reliability.md: the time from SIGKILL of the leader to the standby holding the Lease, and to a verdict
change made after the kill being written; that the standby writes nothing at all while the leader lives;
that every write changes the object (no duplicate write of one verdict); and that a takeover rewrites no
unchanged diagnosis (same resourceVersion).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.builders import Job

from . import kube
from .conftest import ClusterHandle
from .test_operator import (
    SA_NAMESPACE,
    Operator,
    adiag,
    install_crd_and_rbac,
    reason_of,
    setup_queue,
    start_operator,
    token_kubeconfig,
)

LEASE = "kueue-doctor"  # the name the shipped Role lets the operator renew
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{SA_NAMESPACE}/leases/{LEASE}"
DURATION, RENEW, RETRY = 10, 7, 2  # the defaults of `kueue-doctor run --leader-elect`
ELECTION = ("--leader-elect", f"--leader-elect-resource-namespace={SA_NAMESPACE}",
            f"--leader-elect-resource-name={LEASE}")
RBAC = "/apis/rbac.authorization.k8s.io/v1"


def replica_account(cluster: ClusterHandle, name: str, lease: bool = True) -> None:
    """A ServiceAccount with exactly the shipped operator's rights (ClusterRoles and, unless `lease` is False, the
    Lease Role)."""
    api = cluster.api_client
    kube.request_json(api, "PATCH", f"/api/v1/namespaces/{SA_NAMESPACE}/serviceaccounts/{name}",
                      {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
                      query={"fieldManager": "e2e", "force": "true"}, content_type="application/apply-patch+yaml")
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": SA_NAMESPACE}]
    for role in ("kueue-doctor", "kueue-doctor-kueue-config"):
        kube.request_json(api, "PATCH", f"{RBAC}/clusterrolebindings/{name}-{role}", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{name}-{role}"}, "subjects": subject,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}},
            query={"fieldManager": "e2e", "force": "true"}, content_type="application/apply-patch+yaml")
    if not lease:
        return
    kube.request_json(api, "PATCH", f"{RBAC}/namespaces/{SA_NAMESPACE}/rolebindings/{name}-lease", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": f"{name}-lease", "namespace": SA_NAMESPACE}, "subjects": subject,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kueue-doctor-leader-election"}},
        query={"fieldManager": "e2e", "force": "true"}, content_type="application/apply-patch+yaml")


def user(name: str) -> str:
    return f"system:serviceaccount:{SA_NAMESPACE}:{name}"


def lease(api: Any) -> dict[str, Any] | None:
    try:
        out: dict[str, Any] = kube.request_json(api, "GET", LEASE_PATH)
    except Exception as exc:
        if getattr(exc, "status", None) == 404:
            return None
        raise
    return out


def holder(api: Any) -> str:
    found = lease(api)
    return str(((found or {}).get("spec") or {}).get("holderIdentity") or "")


def gauge(op: Operator, name: str) -> float | None:
    for line in op.metrics().splitlines():
        if line.startswith(f"{name} ") or line.startswith(f"{name}{{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def probe(op: Operator, path: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{op.health_port}{path}", timeout=5) as rsp:
            return int(rsp.status), json.loads(rsp.read())
    except urllib.error.HTTPError as exc:
        return int(exc.code), json.loads(exc.read())


def kill(op: Operator) -> None:
    os.killpg(op.proc.pid, signal.SIGKILL)
    op.proc.wait(timeout=10)


def diagnosis_writes(cluster: ClusterHandle, username: str, namespace: str, since: float = 0.0,
                     name: str | None = None) -> list[dict[str, Any]]:
    out = []
    for w in cluster.writes_by_user(username):
        ref = w["objectRef"]
        if ref.get("resource") != "admissiondiagnoses" or ref.get("namespace") != namespace:
            continue
        if name is not None and ref.get("name") != name:
            continue
        if kube_time(w["requestReceivedTimestamp"]) >= since:
            out.append(w)
    return out


def kube_time(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class VersionWatch(threading.Thread):
    """Every resourceVersion an AdmissionDiagnosis takes, from a real watch (polling could miss a quick change)."""

    def __init__(self, api: Any, namespace: str) -> None:
        super().__init__(daemon=True)
        self.api, self.namespace = api, namespace
        self.versions: dict[str, list[str]] = {}
        self.stopped = threading.Event()

    def run(self) -> None:
        from kubernetes import client, watch

        custom = client.CustomObjectsApi(self.api)
        rv: str | None = None  # each 5 s stream goes on from the last version seen: a new LIST would skip versions
        while not self.stopped.is_set():
            w = watch.Watch()
            try:
                for event in w.stream(custom.list_namespaced_custom_object, "kueue-doctor.dev", "v1alpha1",
                                      self.namespace, "admissiondiagnoses", timeout_seconds=5,
                                      **({"resource_version": rv} if rv else {})):
                    md = event["object"]["metadata"]
                    rv = md.get("resourceVersion") or rv
                    seen = self.versions.setdefault(md["name"], [])
                    if event["type"] in ("ADDED", "MODIFIED") and md["resourceVersion"] not in seen:
                        seen.append(md["resourceVersion"])
                    if self.stopped.is_set():
                        w.stop()
            except Exception:  # 410 Gone (list again), or the namespace or the cluster going away at the end
                rv = None
                if self.stopped.wait(1):
                    return

    def since(self, name: str, mark: int) -> list[str]:
        """The versions `name` took after `mark` (a length of its list taken earlier)."""
        return self.versions.get(name, [])[mark:]


@pytest.fixture
def replicas(cluster: ClusterHandle, tmp_path: Path) -> Iterator[list[Operator]]:
    """Started operators, each with its own ServiceAccount; all killed afterwards, and the Lease removed."""
    if cluster.local is None:
        pytest.skip("needs the local control plane (token minting, audit log)")
    install_crd_and_rbac(cluster)
    started: list[Operator] = []
    yield started
    for op in started:
        if op.proc.poll() is None:
            kill(op)
    if lease(cluster.api_client) is not None:
        kube.request_json(cluster.api_client, "DELETE", LEASE_PATH)


def start_replica(cluster: ClusterHandle, tmp_path: Path, name: str, namespace: str, started: list[Operator],
                  lease: bool = True) -> Operator:
    replica_account(cluster, name, lease)
    op = start_operator(token_kubeconfig(cluster, tmp_path, name), tmp_path, "-n", namespace, "--log-format=json",
                        *ELECTION)
    started.append(op)
    return op


def ready_role(op: Operator) -> str:
    code, body = probe(op, "/readyz")
    return "leader" if code == 200 and body.get("leader") else "standby" if code == 200 else ""


def test_two_replicas_one_writer_every_write_a_change_and_a_warm_standby(
        cluster: ClusterHandle, resources: kube.Resources, namespace: str, tmp_path: Path,
        replicas: list[Operator]) -> None:
    api = cluster.api_client
    watcher = VersionWatch(api, namespace)
    watcher.start()
    try:
        one_writer_every_write_a_change(cluster, resources, namespace, tmp_path, replicas, watcher)
    finally:
        watcher.stopped.set()


def one_writer_every_write_a_change(cluster: ClusterHandle, resources: kube.Resources, namespace: str,
                                    tmp_path: Path, replicas: list[Operator], watcher: VersionWatch) -> None:
    api = cluster.api_client
    first = start_replica(cluster, tmp_path, "kd-replica-a", namespace, replicas)
    kube.wait_for(lambda: ready_role(first) == "leader", timeout=30,
                  message=lambda: f"the first replica to lead:\n{first.tail()}")
    second = start_replica(cluster, tmp_path, "kd-replica-b", namespace, replicas)
    kube.wait_for(lambda: ready_role(second) == "standby", timeout=30, message="the second replica ready, standing by")
    t0 = time.time()

    cq = setup_queue(resources, namespace, 2)
    # a longer story: ExceedsMaxQuota, then admitted, Pods created and started, Running
    resources.create(Job("big", namespace).queue("main").parallelism(3).request("cpu", "100m").manifest())
    wl_name = kube.wait_for_workload(api, namespace, "big")["metadata"]["name"]
    kube.wait_for(lambda: reason_of(api, namespace, wl_name) == "ExceedsMaxQuota", timeout=60,
                  message=lambda: f"ExceedsMaxQuota, got {reason_of(api, namespace, wl_name)}:\n{first.tail()}")
    # the verdict changes: the platform admin raises the quota
    kube.patch(api, "ClusterQueue", cq, {"spec": {"resourceGroups": [{"coveredResources": ["cpu", "pods"], "flavors": [
        {"name": f"rf-{cq.removeprefix('cq-')}", "resources": [{"name": "cpu", "nominalQuota": "400m"},
                                                              {"name": "pods", "nominalQuota": "4"}]}]}]}})
    kube.wait_for(lambda: reason_of(api, namespace, wl_name) == "Running", timeout=60,
                  message=lambda: f"Running, got {reason_of(api, namespace, wl_name)}")
    time.sleep(2 * RETRY + 1)  # a refresh interval (2 s) for any number-only change, and Lease renewals

    # one verdict change, one step (ExceedsMaxQuota -> QueueMisconfigured, no Pods involved): only the leader writes,
    # and every write is a new version (Kueue may update the Workload twice: the verdict, then its message)
    resources.create(Job("moved", namespace).queue("main").parallelism(5).request("cpu", "100m").manifest())
    moved = kube.wait_for_workload(api, namespace, "moved")["metadata"]["name"]
    kube.wait_for(lambda: reason_of(api, namespace, moved) == "ExceedsMaxQuota", timeout=60,
                  message=lambda: f"ExceedsMaxQuota, got {reason_of(api, namespace, moved)}:\n{first.tail()}")
    time.sleep(3)  # the refresh interval: nothing pending for `moved`
    t_moved, mark = time.time(), len(watcher.versions.get(moved, []))
    kube.patch(api, "Job", "moved", {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "nowhere"}}}, namespace)
    kube.wait_for(lambda: reason_of(api, namespace, moved) == "QueueMisconfigured", timeout=30,
                  message="QueueMisconfigured")
    time.sleep(2 * RETRY + 1)
    single_change = [w for u in ("kd-replica-a", "kd-replica-b")
                     for w in diagnosis_writes(cluster, user(u), namespace, t_moved, moved)]
    assert {w["user"]["username"] for w in single_change} == {user("kd-replica-a")}, single_change
    assert len(single_change) == len(watcher.since(moved, mark)) >= 1, (single_change, watcher.since(moved, mark))

    # the standby wrote nothing at all: no diagnosis, no Lease (it only reads it while the leader renews)
    assert cluster.writes_by_user(user("kd-replica-b")) == []
    writes = diagnosis_writes(cluster, user("kd-replica-a"), namespace, t0, wl_name)
    versions = watcher.versions.get(wl_name, [])
    # every write changed the object: as many writes as resourceVersions (a second writer of the same verdict,
    # the symptom of two replicas without election, adds writes but no versions)
    assert len(writes) == len(versions) >= 2, (len(writes), versions)
    print(f"\nExceedsMaxQuota -> QueueMisconfigured: {len(single_change)} writes, {len(watcher.since(moved, mark))} "
          f"versions; ExceedsMaxQuota -> Running: {len(writes)} writes, {len(versions)} versions; standby writes 0")

    # the standby is warm: it watched and diagnosed the same Workload, says it stands by, exports no verdicts
    assert gauge(second, "kueue_doctor_leader") == 0.0 and gauge(first, "kueue_doctor_leader") == 1.0
    assert (gauge(second, "kueue_doctor_diagnosis_passes_total") or 0) > 0
    assert (gauge(second, 'kueue_doctor_watch_events_total{kind="Workload"}') or 0) > 0
    assert gauge(second, 'kueue_doctor_writes_total{result="applied"}') is None
    assert not [ln for ln in second.metrics().splitlines() if ln.startswith("kueue_doctor_workloads{")]
    assert [ln for ln in first.metrics().splitlines() if ln.startswith("kueue_doctor_workloads{")]
    code, body = probe(second, "/healthz")
    assert code == 200 and body["role"] == "standby"
    assert "Standby:" in second.log.read_text()


def test_sigkill_of_the_leader_the_standby_takes_over_rewriting_nothing_unchanged(
        cluster: ClusterHandle, resources: kube.Resources, namespace: str, tmp_path: Path,
        replicas: list[Operator]) -> None:
    api = cluster.api_client
    leader = start_replica(cluster, tmp_path, "kd-replica-a", namespace, replicas)
    kube.wait_for(lambda: ready_role(leader) == "leader", timeout=30, message=lambda: f"a leader:\n{leader.tail()}")
    standby = start_replica(cluster, tmp_path, "kd-replica-b", namespace, replicas)
    kube.wait_for(lambda: ready_role(standby) == "standby", timeout=30, message="a standby")

    cq = setup_queue(resources, namespace, 1)
    resources.create(Job("stays", namespace).queue("main").parallelism(2).request("cpu", "100m").manifest())
    resources.create(Job("changes", namespace).queue("main").parallelism(3).request("cpu", "100m").manifest())
    stays = kube.wait_for_workload(api, namespace, "stays")["metadata"]["name"]
    changes = kube.wait_for_workload(api, namespace, "changes")["metadata"]["name"]
    kube.wait_for(lambda: reason_of(api, namespace, stays) == reason_of(api, namespace, changes) == "ExceedsMaxQuota",
                  timeout=60, message="both diagnoses")
    time.sleep(3)  # the refresh interval: any pending number-only write is done before the kill
    stays_rv = adiag(api, namespace, stays)["metadata"]["resourceVersion"]  # type: ignore[index]
    old_holder = holder(api)

    t_kill = time.time()
    kill(leader)
    # a verdict change right after the kill: only the standby can write it. The Job asks for 3 Pods, the quota
    # becomes 3: `changes` fits, `stays` (2 Pods) does too but must wait behind it in the same ClusterQueue...
    # so change only `changes`: its Job is suspended for good (a verdict that needs no quota)
    kube.patch(api, "Job", "changes", {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "nowhere"}}},
               namespace)
    new_reason = kube.wait_for(
        lambda: (r := reason_of(api, namespace, changes)) != "ExceedsMaxQuota" and r, timeout=45, interval=0.1,
        message=lambda: f"the standby to write the new verdict:\n{standby.tail()}")
    t_written = time.time()
    t_lease = kube_time(lease(api)["spec"]["acquireTime"])  # type: ignore[index]
    assert holder(api) not in ("", old_holder)
    takeover, written = t_lease - t_kill, t_written - t_kill
    print(f"\nSIGKILL -> standby holds the Lease: {takeover:.1f}s; -> new verdict {new_reason} written: "
          f"{written:.1f}s (lease {DURATION}s, retry {RETRY}s)")
    assert takeover <= 15.0, f"takeover took {takeover:.1f}s"
    assert written <= 15.0 + 5.0, f"the verdict change was written {written:.1f}s after the kill"

    time.sleep(2 * RETRY + 1)  # the takeover pass and a refresh interval are done
    assert adiag(api, namespace, stays)["metadata"]["resourceVersion"] == stays_rv  # type: ignore[index]
    assert diagnosis_writes(cluster, user("kd-replica-b"), namespace, name=stays) == []
    assert ready_role(standby) == "leader" and gauge(standby, "kueue_doctor_leader") == 1.0
    assert standby.proc.poll() is None
    del cq


def test_a_graceful_stop_releases_the_lease_and_the_standby_takes_over_at_once(
        cluster: ClusterHandle, namespace: str, tmp_path: Path, replicas: list[Operator]) -> None:
    leader = start_replica(cluster, tmp_path, "kd-replica-a", namespace, replicas)
    kube.wait_for(lambda: ready_role(leader) == "leader", timeout=30, message="a leader")
    standby = start_replica(cluster, tmp_path, "kd-replica-b", namespace, replicas)
    kube.wait_for(lambda: ready_role(standby) == "standby", timeout=30, message="a standby")
    t_stop = time.time()
    leader.proc.terminate()  # SIGTERM, as the kubelet sends in a rolling update or a drain
    kube.wait_for(lambda: ready_role(standby) == "leader", timeout=15, interval=0.1,
                  message=lambda: f"the standby to lead:\n{standby.tail()}")
    took = time.time() - t_stop
    leader.proc.wait(timeout=30)
    exited = time.time() - t_stop
    print(f"\nSIGTERM -> standby leads: {took:.1f}s (the old leader exited after {exited:.1f}s)")
    assert took <= RETRY * 1.2 + 2.0, f"{took:.1f}s: was the Lease released?"
    assert "Released Lease" in leader.log.read_text()
    assert leader.proc.returncode == 0


def test_without_rights_on_the_lease_a_replica_says_so_once_and_writes_nothing(
        cluster: ClusterHandle, resources: kube.Resources, namespace: str, tmp_path: Path,
        replicas: list[Operator]) -> None:
    api = cluster.api_client
    op = start_replica(cluster, tmp_path, "kd-no-lease", namespace, replicas, lease=False)
    kube.wait_for(lambda: ready_role(op) == "standby", timeout=30, message="ready, standing by")
    setup_queue(resources, namespace, 1)
    resources.create(Job("big", namespace).queue("main").parallelism(2).request("cpu", "100m").manifest())
    kube.wait_for_workload(api, namespace, "big")
    kube.wait_for(lambda: (gauge(op, "kueue_doctor_diagnosis_passes_total") or 0) >= 2, timeout=30,
                  message="a pass over the new Workload")
    time.sleep(3 * RETRY)  # several attempts at the Lease
    assert cluster.writes_by_user(user("kd-no-lease")) == []
    assert gauge(op, "kueue_doctor_leader") == 0.0 and op.proc.poll() is None
    said = [ln for ln in op.log.read_text().splitlines() if "Cannot read or update Lease" in ln]
    assert len(said) == 1 and "grant get, create and update on leases" in said[0], said
