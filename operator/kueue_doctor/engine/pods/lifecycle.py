"""When a Workload's Pods started and how its failed Pods ended: what a post-mortem names.

Kueue keeps only the latest change of each condition, so once a Workload finished its PodsReady time no longer
says when the Pods started (a Pod that failed turned it False, `WaitForRecovery`); the Pods still do (their
containers' ``startedAt``), and a Failed Pod keeps how its container ended (``OOMKilled``, exit code 137) and when.

Neighbours: `summary.py` (the Pods of a Workload still running: counts and what blocks them; `why_failed` is its),
`kubelet.py` (the kubelet's reasons).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ...kube.objects import as_time, conditions, int_or_none, lst, m, s, when_text
from .summary import why_failed

SHOWN = 3  # failed Pods named in a message; the rest are counted


@dataclass(frozen=True)
class FailedPod:
    """A Pod in phase Failed, as a message names it: "trainer-x7k2p (OOMKilled, exit code 137)"."""

    name: str
    reason: str  # the Pod's own reason (Evicted, DeadlineExceeded), else its container's (OOMKilled, Error)
    message: str
    exit_code: int | None  # of the container that ended it; None when none ran to an end
    container: str  # that container ("" when none)
    restarts: int  # its restartCount: a previous run's logs are read with --previous
    at: datetime | None  # when it ended: the container's finishedAt, else the Pod's Ready=False transition

    def text(self) -> str:
        why = f"{self.reason}, exit code {self.exit_code}" if self.exit_code is not None else self.reason
        return f"{self.name} ({why})" + (f" at {when_text(self.at)}" if self.at is not None else "")

    def logs_command(self, namespace: str) -> str:
        """`kubectl logs` of the container that ended it (a Failed Pod's container keeps its last output)."""
        container = f" -c {self.container}" if self.container else ""
        previous = " --previous" if self.restarts else ""
        return f"kubectl logs {self.name} -n {namespace}{container}{previous}"


def failed_pods(pods: Iterable[Mapping[str, Any]]) -> list[FailedPod]:
    """The Failed Pods, the earliest failure first (those with no time last, by name)."""
    out = []
    for pod in pods:
        st = m(pod.get("status"))
        if st.get("phase") != "Failed":
            continue
        reason, message, _ = why_failed(st)
        container, restarts, ended = _ending_container(st)
        at = as_time(ended.get("finishedAt")) or as_time(m(conditions(pod).get("Ready")).get("lastTransitionTime"))
        out.append(FailedPod(s(m(pod.get("metadata")).get("name")) or "", reason, message,
                             int_or_none(ended.get("exitCode")), container, restarts, at))
    out.sort(key=lambda f: (f.at is None, f.at.timestamp() if f.at is not None else 0.0, f.name))
    return out


def _ending_container(status: Mapping[str, Any]) -> tuple[str, int, Mapping[str, Any]]:
    """The first container (regular ones first) that terminated with a non-zero exit code: its name, restartCount
    and terminated state; ("", 0, {}) when none did."""
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in lst(status.get(key)):
            cs = m(cs)
            terminated = m(m(cs.get("state")).get("terminated"))
            if int_or_none(terminated.get("exitCode")) not in (0, None):
                return s(cs.get("name")) or "", int_or_none(cs.get("restartCount")) or 0, terminated
    return "", 0, {}


def failed_pods_text(failed: Sequence[FailedPod], shown: int = SHOWN) -> str:
    """"2 Pods failed: a (OOMKilled, exit code 137) at T, b (...)": the first `shown`, the rest counted; "" for
    none."""
    if not failed:
        return ""
    more = len(failed) - shown
    listed = ", ".join(f.text() for f in failed[:shown]) + (f" and {more} more" if more > 0 else "")
    return f"{len(failed)} Pod{'s' if len(failed) != 1 else ''} failed: {listed}"


def memory_limits(pod: Mapping[str, Any] | None) -> str:
    """" (main: 512Mi)": the memory limits of the Pod's containers, as the kubelet enforces them."""
    limits = [f"{s(m(c).get('name'))}: {s(m(m(m(c).get('resources')).get('limits')).get('memory'))}"
              for c in lst(m(pod.get("spec") if pod else {}).get("containers"))
              if s(m(m(m(c).get("resources")).get("limits")).get("memory"))]
    return f" ({', '.join(limits[:3])})" if limits else " (no memory limit set: the node's memory ran out)"


def first_start(pods: Iterable[Mapping[str, Any]], after: datetime, before: datetime | None) -> datetime | None:
    """When the first of the Pods started a container (``startedAt`` of a running or terminated one, or of its
    previous run), between `after` (the admission: an earlier admission's Pods do not count) and `before`."""
    first: datetime | None = None
    for pod in pods:
        for cs in lst(m(pod.get("status")).get("containerStatuses")):
            cs = m(cs)
            for state in (m(cs.get("state")), m(cs.get("lastState"))):
                for key in ("running", "terminated"):
                    at = as_time(m(state.get(key)).get("startedAt"))
                    if at is not None and at >= after and (before is None or at <= before) \
                            and (first is None or at < first):
                        first = at
    return first
