"""Pods their operator starts before the Pods they need: their failures follow from those Pods' wait.

mpi-operator's launcher runs mpirun, which reaches the workers by hostname; the workers' Service publishes them
only once they are Ready (publishNotReadyAddresses only with runLauncherAsWorker). launcherCreationPolicy
WaitForWorkersReady creates the launcher Job once every worker is Ready, but an MPIJob that starts suspended has no
workers yet, so "0 of 0 ready" passes: the launcher Job is created at once and unsuspended in the same sync that
creates the workers (mpi-operator v0.8 pkg/controller/mpi_job_controller.go syncHandler; mpi-operator#615). Kueue
creates every MPIJob it manages suspended, so the launcher starts with its workers and exits non-zero until they
are up. Reading its logs finds no bug; the workers' wait is the verdict.

Neighbours: `summary.py` marks such a launcher's failures (`PodBlocker.waits_for`) and ranks them after the
wait they follow from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...kube.objects import s

OPERATOR_LABEL = "training.kubeflow.org/operator-name"
JOB_LABEL = "training.kubeflow.org/job-name"
ROLE_LABEL = "training.kubeflow.org/job-role"


@dataclass(frozen=True)
class EarlyStarter:
    """A role an operator starts together with (not after) the role it needs."""

    operator: str  # the value of OPERATOR_LABEL on its Pods
    role: str  # the role that starts early (ROLE_LABEL)
    needs: str  # the role it cannot do without


# the verdict's words for these failures are mpi-operator's (engine/scheduling/early_start.py): another operator
# added here needs its own
EARLY_STARTERS = (EarlyStarter("mpi-operator", "launcher", "worker"),)
_BY_OPERATOR = {e.operator: e for e in EARLY_STARTERS}

# How a process that cannot reach its peers ends: a non-zero exit, restarted (CrashLoopBackOff) or failed (Error).
# OOMKilled, deadlines, evictions and the kubelet's refusals are the Pod's own trouble, whatever the peers do.
CONNECTION_FAILURES = frozenset({"CrashLoopBackOff", "Error"})
_OWN_TROUBLE = "OOMKilled"


@dataclass(frozen=True)
class Peer:
    """Where a Pod of an EARLY_STARTERS operator stands: its job and role, and the role it waits for if any."""

    operator: str
    job: str
    role: str
    needs: str  # "" unless this role starts early


def peer_of(labels: Mapping[str, Any]) -> Peer | None:
    """The Pod's place among its job's Pods, when an EARLY_STARTERS operator made it (by its labels)."""
    operator = s(labels.get(OPERATOR_LABEL))
    starter = _BY_OPERATOR.get(operator or "")
    if starter is None:
        return None
    job, role = s(labels.get(JOB_LABEL)) or "", s(labels.get(ROLE_LABEL)) or ""
    if not job or not role:
        return None
    return Peer(starter.operator, job, role, starter.needs if role == starter.role else "")


def connection_failure(reason: str, detail: str) -> bool:
    """Could this failure be a process that gave up on peers that are not up (not one of its own making)?"""
    return reason in CONNECTION_FAILURES and not detail.startswith(_OWN_TROUBLE)
