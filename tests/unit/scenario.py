"""One small cluster as the apiserver serves it (team-a: one ClusterQueue, a running and a waiting
Workload), and an operator started on it the way service.serve starts one, before Kopf runs."""

from __future__ import annotations

import asyncio
from typing import Any

from kueue_doctor.live.runtime import Options, Runtime
from tests.builders import Admission, ClusterQueue, LocalQueue, Namespace, ResourceFlavor, Workload, condition

from .apiserver import FakeApiServer, cluster

DIAGNOSES = "/apis/kueue-doctor.dev/v1alpha1/namespaces/team-a/admissiondiagnoses"
PENDING = ("couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default-flavor, "
           "1 more needed")
MAX_CAPACITY = ("couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default-flavor, "
                "previously considered podsets requests (0) + current podset request (3) > maximum capacity (2)")
RESOURCE_VERSION = "100"


def running() -> Workload:
    """job-run-00001: admitted, holding all 2 cpu of cq-a."""
    at = "2026-11-30T09:00:05Z"
    return (Workload("job-run-00001", "team-a").queue("user-queue").request("cpu", "2")
            .admission(Admission("cq-a").assignment(flavors={"cpu": "default-flavor"}, usage={"cpu": "2"}))
            .conditions(condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq-a", at),
                        condition("Admitted", "True", "Admitted", "The workload is admitted", at)))


def waiting(message: str = PENDING) -> Workload:
    """job-wait-00002: one cpu, not admitted, with Kueue's Pending message."""
    return (Workload("job-wait-00002", "team-a").queue("user-queue").request("cpu", "1")
            .condition(condition("QuotaReserved", "False", "Pending", message)))


def objects() -> list[dict[str, Any]]:
    """Namespace, flavor, queues (status counting the running Workload), running and waiting Workload."""
    cq = (ClusterQueue("cq-a").quotas({"default-flavor": {"cpu": "2"}}).reservation("default-flavor", "cpu", "2")
          .usage("default-flavor", "cpu", "2").workloads(reserving=1, admitted=1))
    lq = (LocalQueue("user-queue", "team-a", "cq-a").reservation("default-flavor", "cpu", "2")
          .usage("default-flavor", "cpu", "2").workloads(reserving=1, admitted=1))
    return [o.resource_version(RESOURCE_VERSION).obj()
            for o in (Namespace("team-a"), ResourceFlavor("default-flavor"), cq, lq, running(), waiting())]


async def start(rt: Runtime) -> None:
    """What service.serve does before Kopf starts: Kueue served? which kinds may we see? list them all."""
    assert await rt.discovery.kueue_served()
    await rt.discovery.check_access()
    await rt.initial_sync()


def started(objs: list[dict[str, Any]], api: FakeApiServer | None = None, debounce: float = 0.5
            ) -> tuple[Runtime, FakeApiServer]:
    api = api or cluster(objs)
    rt = Runtime(api, Options(writes_per_second=0, debounce=debounce))
    asyncio.run(start(rt))
    return rt, api
