"""A launcher that fails while the workers it needs are not up: the workers' wait is the verdict (mpi-operator#615).

`pods/peers.py` marks such failures (`PodBlocker.waits_for`) and the Pod summary ranks them after the wait they
follow from, so `workload_pods.containers_not_starting` meets the workers first. This module writes what that
verdict says beyond the workers' wait: why the launcher fails, how many restarts its Job has left, and what the
owner can do before the MPIJob fails.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ...kube.objects import (
    controller_ref,
    i,
    int_or_none,
    labels,
    lst,
    m,
    name,
    s,
    spec,
    status,
    when_text,
)
from .. import pods as podlib
from ..context import Context
from ..pods.kubelet import PULLING_IMAGE
from ..pods.peers import peer_of

_PULLING_RX = re.compile(r'Pulling image "(?P<image>[^"]+)"')  # the kubelet's PullingImage event


def failing_early(summary: podlib.PodSummary) -> podlib.PodBlocker | None:
    """The group of Pods that fail because the peers they need are not up yet, if any."""
    return next((b for b in summary.blockers if b.waits_for), None)


def _pods(ctx: Context, names: tuple[str, ...]) -> list[Mapping[str, Any]]:
    wanted = set(names)
    return [p for p in ctx.pods if name(p) in wanted]


def _role(pod: Mapping[str, Any]) -> str:
    peer = peer_of(labels(pod))
    return peer.role if peer is not None else ""


def _workers_wait(ctx: Context, workers: podlib.PodBlocker, role: str) -> str:
    """"2 of 2 worker Pods of MPIJob ml/x have been ContainerCreating since 10:00:02Z: the kubelet is still
    pulling <image> on h100-2, h100-3"."""
    total = sum(1 for p in ctx.pods if _role(p) == role)
    owner = ctx.owner
    of = f" of {s(owner.get('kind'))} {ctx.ns}/{name(owner)}" if owner is not None else ""
    head = f"{workers.count} of {max(total, workers.count)} {role} Pods{of} have been"
    since = when_text(workers.since)
    pulling = _PULLING_RX.search(workers.message) if workers.detail.startswith(PULLING_IMAGE) else None
    if pulling is not None:
        nodes = sorted({s(spec(p).get("nodeName")) or "" for p in _pods(ctx, workers.pods)} - {""})
        on = f" on {', '.join(nodes[:4])}" + (", ..." if len(nodes) > 4 else "") if nodes else ""
        return f"{head} {workers.reason} since {since}: the kubelet is still pulling {pulling['image']}{on}"
    detail = f" ({workers.detail})" if workers.detail and workers.detail != workers.reason else ""
    msg = f": {workers.message[:200]}" if workers.message else ""
    return f"{head} waiting since {since}: {workers.reason}{detail}{msg} (pod {workers.pod})"


def _launcher_job(ctx: Context, launcher: podlib.PodBlocker) -> Mapping[str, Any] | None:
    """The Job that runs the launcher Pods, when the input has it."""
    jobs = ctx.state.collection("Job") or {}
    for pod in _pods(ctx, launcher.pods):
        ref = controller_ref(pod)
        if ref is not None and ref.get("kind") == "Job":
            job = jobs.get((ctx.ns, "Job", s(ref.get("name")) or ""))
            if job is not None:
                return job
    return None


def _backoff(ctx: Context, launcher: podlib.PodBlocker) -> tuple[str, bool]:
    """How close the launcher Job is to its backoffLimit, and whether it reached it. With restartPolicy OnFailure
    (CrashLoopBackOff) the Job controller fails the Job once its running Pods' container restarts reach
    backoffLimit; with Never, once more Pods than backoffLimit failed (K pkg/controller/job/job_controller.go
    pastBackoffLimitOnFailure)."""
    job = _launcher_job(ctx, launcher)
    limit = int_or_none(spec(job).get("backoffLimit")) if job is not None else None
    where = f"Job {name(job)}'s backoffLimit" if job is not None else "the launcher Job's backoffLimit"
    if limit is None and ctx.owner is not None:
        limit = int_or_none(m(spec(ctx.owner).get("runPolicy")).get("backoffLimit"))
        where = "runPolicy.backoffLimit"
    if launcher.reason == "CrashLoopBackOff":
        used = sum(i(m(c).get("restartCount")) for p in _pods(ctx, launcher.pods)
                   for key in ("initContainerStatuses", "containerStatuses") for c in lst(status(p).get(key)))
        done, fails_at = f"It restarted {used} times", limit
    else:
        used = i(status(job).get("failed")) if job is not None else launcher.count
        done, fails_at = f"{used} launcher Pod(s) failed", None if limit is None else limit + 1
    if limit is None or fails_at is None:
        return f" {done}; each counts against the launcher Job's backoffLimit.", False
    if used >= fails_at:
        return f" {done}, reaching {where} {limit}: the MPIJob fails with its launcher Job.", True
    return f" {done}; at {fails_at} ({where}) the launcher Job fails, and the MPIJob with it.", False


def explain(ctx: Context, workers: podlib.PodBlocker, launcher: podlib.PodBlocker) -> str:
    """The verdict's text: the workers' wait first, then the launcher's failures as its consequence, then what the
    owner can do (the text must fit the 1024 characters of status.message with the waitForPodsReady note)."""
    role = launcher.waits_for
    policy = s(spec(ctx.owner).get("launcherCreationPolicy")) if ctx.owner is not None else None
    detail = f" ({launcher.detail}; pod {launcher.pod})" if launcher.detail else f" (pod {launcher.pod})"
    early = ("mpi-operator starts the launcher early despite launcherCreationPolicy WaitForWorkersReady"
             if policy == "WaitForWorkersReady" else
             f"mpi-operator starts the launcher with its {role}s (launcherCreationPolicy {policy or 'AtStartup'}); "
             "WaitForWorkersReady would not help, it is skipped")
    backoff, spent = _backoff(ctx, launcher)
    faster = ("pre-pull or cache the image on the nodes" if workers.detail.startswith(PULLING_IMAGE)
              else f"fix the {role}s' wait")
    remedy = (f"{faster}, and resubmit with a higher runPolicy.backoffLimit." if spent else
              f"{faster}, or raise the launcher Job's backoffLimit now (mpi-operator keeps it) and "
              "runPolicy.backoffLimit for later runs.")
    return (f"{_workers_wait(ctx, workers, role)}. The launcher's {launcher.reason}{detail} follows from it: mpirun "
            f"cannot reach {role}s that are not up; its logs show no bug. {early} when an MPIJob starts suspended, "
            f"as all Kueue-managed ones do (mpi-operator#615).{backoff} The owner: {remedy}")
