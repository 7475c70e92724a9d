"""Deprecated: the old function names, kept for tests/unit/test_runtime.py until its owner moves it to
tests/builders.py. Everything is built by tests/builders.py; do not add users, delete when test_runtime.py
no longer imports it.
"""

from __future__ import annotations

from typing import Any

from tests import builders as b

cond = b.condition


def flavor(name: str) -> dict[str, Any]:
    return b.ResourceFlavor(name).obj()


def cluster_queue(name: str, quotas: dict[str, dict[str, Any]], cohort: str | None = None) -> dict[str, Any]:
    cq = b.ClusterQueue(name).quotas(quotas)
    return (cq.cohort(cohort) if cohort else cq).obj()


def local_queue(name: str, namespace: str, cq: str) -> dict[str, Any]:
    return b.LocalQueue(name, namespace, cq).obj()


def job(name: str, namespace: str = "team-a") -> dict[str, Any]:
    return b.Job(name, namespace).queue("user-queue").request("cpu", "1").obj()


def admission(cq: str) -> dict[str, Any]:
    return b.Admission(cq).assignment(flavors={"cpu": "default-flavor"}, usage={"cpu": "1"}).obj()


def admitted_conditions(cq: str) -> list[dict[str, Any]]:
    at = "2026-11-30T09:00:05Z"
    return [cond("QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq}", at),
            cond("Admitted", "True", "Admitted", "The workload is admitted", at)]


def workload(name: str, conditions: list[dict[str, Any]] | None = None,
             admission: dict[str, Any] | None = None) -> dict[str, Any]:
    wl = b.Workload(name, "team-a").queue("user-queue").request("cpu", "1").conditions(*(conditions or []))
    return wl.admission(admission).obj()


def event(involved: dict[str, Any], reason: str, message: str) -> dict[str, Any]:
    return b.Event(involved, reason, message).obj()
