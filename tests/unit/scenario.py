"""One small cluster as the apiserver serves it (team-a: one ClusterQueue, a running and a waiting
Workload), and an operator started on it the way service.serve starts one, before Kopf runs."""

from __future__ import annotations

import asyncio
from typing import Any

from kueue_doctor.live.runtime import Options, Runtime

from .apiserver import FakeApiServer, cluster
from .factory import admission, admitted_conditions, cluster_queue, cond, flavor, local_queue, workload

DIAGNOSES = "/apis/kueue-doctor.dev/v1alpha1/namespaces/team-a/admissiondiagnoses"
PENDING = ("couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default-flavor, "
           "1 more needed")
MAX_CAPACITY = ("couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default-flavor, "
                "previously considered podsets requests (0) + current podset request (3) > maximum capacity (2)")


def objects() -> list[dict[str, Any]]:
    objs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "uid": "ns-0001",
                                                               "creationTimestamp": "2026-11-30T08:00:00Z"},
         "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}},
        flavor("default-flavor"),
        cluster_queue("cq-a", {"default-flavor": {"cpu": "2"}}, reserving=1, used={"default-flavor": {"cpu": "2"}}),
        local_queue("user-queue", "team-a", "cq-a"),
        workload("job-run-00001", cpu="2", admission=admission("cq-a", cpu="2"),
                 conditions=admitted_conditions("cq-a")),
        workload("job-wait-00002", conditions=[cond("QuotaReserved", "False", "Pending", PENDING)]),
    ]
    for o in objs:
        o["metadata"]["resourceVersion"] = "100"
    return objs


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
