"""Leader election on a `coordination.k8s.io/v1` Lease: one replica writes, the others stand by warm.

Why not `kubernetes.leaderelection`: it runs in threads with blocking sleeps, exits the process
(`sys.exit`) on a bad configuration, elects only once (after losing the lease `run()` returns for good),
builds its own client instead of the operator's, and logs at INFO on every retry. This is the same
protocol as client-go's (a holder, a duration, a renew time; expiry judged by the local clock from the
moment a change of the record was *seen*, never by comparing clocks), on asyncio and on the operator's
own credentials, with optimistic concurrency (every update carries the resourceVersion read, a 409 means
another replica got there first).

- Standby: reads the Lease every `retry_period` (with jitter); takes it when its holder has not renewed
  it for `lease_duration` as seen from here, or when it is free (a leader that shut down released it).
- Leader: renews every `retry_period`; when it cannot renew for `renew_deadline` (shorter than the
  duration, so it stops before anyone may take over) or sees another holder, it steps down to standby:
  it stops writing but keeps its watches and state, ready to lead again.
- On a graceful stop the leader releases the Lease (empty holder), so a standby takes over at its next
  read instead of waiting for the lease to expire.

Neighbours: service.py runs `run()` next to the diagnosis loop and turns `on_change` into
`Publisher.leading` (only the leader writes) and the `kueue_doctor_leader` gauge.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from . import rest

log = logging.getLogger("kueue_doctor.leader")
SA_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
JITTER = 1.2  # a standby waits between 1 and 1.2 retry periods (client-go's jitter factor)


@dataclass(frozen=True)
class ElectionConfig:
    namespace: str
    lease_name: str = "kueue-doctor"
    lease_duration: float = 10.0  # seconds a standby waits, from the last renewal it saw, before taking over
    renew_deadline: float = 7.0  # seconds a leader keeps trying to renew before it steps down
    retry_period: float = 2.0  # seconds between two reads (standby) or renewals (leader)
    identity: str = ""

    def problems(self) -> list[str]:
        """What is wrong with these durations (empty: usable); the same rules as client-go."""
        out = []
        if self.retry_period <= 0:
            out.append("the retry period must be positive")
        if self.renew_deadline <= JITTER * self.retry_period:
            out.append(f"the renew deadline ({self.renew_deadline:g}s) must exceed {JITTER:g} x the retry period "
                       f"({self.retry_period:g}s)")
        if self.lease_duration <= self.renew_deadline:
            out.append(f"the lease duration ({self.lease_duration:g}s) must exceed the renew deadline "
                       f"({self.renew_deadline:g}s), or a leader could still write after a standby took over")
        if not self.namespace:
            out.append("no namespace for the Lease: pass --leader-elect-resource-namespace (in a Pod it defaults "
                       "to $POD_NAMESPACE or the service account's namespace)")
        return out


def default_namespace() -> str:
    """The Lease's namespace when none is given: the Pod's (downward API), else the service account's."""
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        with open(SA_NAMESPACE_FILE, encoding="utf-8") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def default_identity() -> str:
    """Unique per process: a restarted container must never mistake the lease of its previous life for its own."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def micro_time(at: float) -> str:
    """A Kubernetes MicroTime (RFC 3339 with microseconds, UTC)."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(self, api: Any, config: ElectionConfig, on_change: Callable[[bool], None]) -> None:
        self.api = api
        self.config = config
        self.identity = config.identity or default_identity()
        self.on_change = on_change
        self.leading = False
        self.holder: str | None = None  # the holder last seen
        self._observed: tuple[Any, ...] | None = None  # the Lease record last seen, and when (monotonic)
        self._observed_at = 0.0
        self._renewed_at = 0.0  # monotonic start of our last successful renewal (the deadline counts from there)
        self._became_standby_at = time.monotonic()
        self._last_problem: str | None = None  # logged once until it changes
        self._previous: str | None = None  # the holder we took the Lease from ("": it was free or new)
        self._released = False  # set by release(): the election is over for this process
        self._turn = asyncio.Lock()  # one attempt or the release at a time
        self._last_status: int | None = None  # of the last failed attempt (0: the apiserver did not answer)

    @property
    def path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.config.namespace}/leases/{self.config.lease_name}"

    @property
    def where(self) -> str:
        return f"Lease {self.config.namespace}/{self.config.lease_name}"

    async def run(self, after_first: Callable[[], None] | None = None) -> None:
        """Until released: read or renew the Lease every retry period; call `on_change` when leadership changes.
        `after_first` is called once, after the first attempt."""
        while not self._released:
            outcome = await self.attempt()
            if self._released:  # stopped while this attempt was on its way
                return
            self._settle(outcome)
            if after_first is not None:
                after_first()
                after_first = None
            period = self.config.retry_period
            await asyncio.sleep(period if self.leading else period * random.uniform(1.0, JITTER))

    async def attempt(self) -> str:
        """One read, and an update when the Lease is ours, free or expired: "mine", "other" or "error"."""
        try:
            async with self._turn:  # never at the same time as release(): it would take back the Lease just given up
                if self._released:
                    return "error"
                return await asyncio.to_thread(self._try_acquire_or_renew)
        except rest.ApiError as exc:
            self._problem(exc)
            self._last_status = exc.status
            return "error"

    def _try_acquire_or_renew(self) -> str:
        now, mono = time.time(), time.monotonic()
        try:
            lease = rest.request(self.api, "GET", self.path)
        except rest.ApiError as exc:
            if exc.status != 404:
                raise
            return self._create(now, mono)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (holder, spec.get("renewTime"), spec.get("acquireTime"), spec.get("leaseDurationSeconds"),
                  spec.get("leaseTransitions"))
        if record != self._observed:
            self._observed, self._observed_at = record, mono
        self.holder = holder or None
        duration = spec.get("leaseDurationSeconds") or self.config.lease_duration
        if holder and holder != self.identity and mono < self._observed_at + duration:
            return "other"
        mine = holder == self.identity
        spec = {**spec, "holderIdentity": self.identity, "leaseDurationSeconds": self._duration_seconds(),
                "renewTime": micro_time(now),
                "acquireTime": spec.get("acquireTime") if mine else micro_time(now),
                "leaseTransitions": (spec.get("leaseTransitions") or 0) + (0 if mine or not holder else 1)}
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {
            "name": self.config.lease_name, "namespace": self.config.namespace,
            "resourceVersion": lease["metadata"]["resourceVersion"]}, "spec": spec}
        try:
            rest.request(self.api, "PUT", self.path, body=body)
        except rest.ApiError as exc:
            if exc.status == 409:  # another replica updated it between our read and our write
                return "other" if not mine else "error"
            raise
        self._seen_own(spec, mono)
        if not self.leading:
            self._previous = holder
        return "mine"

    def _create(self, now: float, mono: float) -> str:
        spec = {"holderIdentity": self.identity, "leaseDurationSeconds": self._duration_seconds(),
                "acquireTime": micro_time(now), "renewTime": micro_time(now), "leaseTransitions": 0}
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.config.lease_name, "namespace": self.config.namespace}, "spec": spec}
        try:
            rest.request(self.api, "POST", self.path.rsplit("/", 1)[0], body=body)
        except rest.ApiError as exc:
            if exc.status == 409:  # created by another replica first
                return "other"
            raise
        self._seen_own(spec, mono)
        self._previous = ""
        return "mine"

    def _seen_own(self, spec: dict[str, Any], mono: float) -> None:
        self._observed = (self.identity, spec["renewTime"], spec["acquireTime"], spec["leaseDurationSeconds"],
                          spec["leaseTransitions"])
        self._observed_at = mono
        self._renewed_at = mono  # when this attempt began: the server accepted the renewal no earlier
        self.holder = self.identity

    def _duration_seconds(self) -> int:
        return max(1, round(self.config.lease_duration))

    def _settle(self, outcome: str) -> None:
        mono = time.monotonic()
        if outcome == "mine":
            self._last_problem = None
            if not self.leading:
                self._lead()
            return
        if not self.leading:
            if outcome == "other" and self._last_problem != f"held:{self.holder}":
                self._last_problem = f"held:{self.holder}"
                log.info("Standby: %s is held by %s. This replica keeps its watches and diagnoses current in "
                         "memory and writes nothing; it takes over %gs after the leader's last renewal it saw.",
                         self.where, self.holder, self.config.lease_duration)
            return
        if outcome == "other":
            self._step_down(f"the Lease is now held by {self.holder}")
        elif mono - self._renewed_at >= self.config.renew_deadline:
            # the apiserver not answering is said once by outage.py; stepping down is then only its consequence
            level = logging.INFO if self._last_status in (0, 502, 503, 504) else logging.WARNING
            self._step_down(f"it could not be renewed for {mono - self._renewed_at:.0f}s (renew deadline "
                            f"{self.config.renew_deadline:g}s)", level)

    def _lead(self) -> None:
        self.leading = True
        waited = time.monotonic() - self._became_standby_at
        if self._previous == self.identity:
            before = f"its own Lease had lapsed; it leads again after {waited:.1f}s as standby"
        elif self._previous:
            before = f"taking over from {self._previous} after {waited:.1f}s as standby"
        else:
            before = "the Lease was free"
        log.info("Leading: this replica (%s) holds %s (%s) and writes AdmissionDiagnoses; every Workload is "
                 "compared with what is stored, unchanged ones are not rewritten.", self.identity, self.where, before)
        self.on_change(True)

    def _step_down(self, why: str, level: int = logging.WARNING) -> None:
        self.leading = False
        self._became_standby_at = time.monotonic()
        log.log(level, "No longer leading: %s: %s. Writing stopped; this replica stands by and takes the Lease again "
                "if it expires. If this repeats, check the apiserver's latency and this Pod's CPU throttling.",
                self.where, why)
        self.on_change(False)

    def _problem(self, exc: rest.ApiError) -> None:
        key = f"status:{exc.status}"
        if key == self._last_problem:
            log.debug("%s: %s", self.where, exc)
            return
        self._last_problem = key
        if exc.status in (401, 403):
            log.warning("Cannot read or update %s (%s). No replica can lead without it, so no AdmissionDiagnosis is "
                        "written: grant get, create and update on leases in namespace %s (the chart and "
                        "manifests/base do).", self.where, exc, self.config.namespace)
        elif exc.status == 404:
            log.warning("Cannot create %s (%s): does namespace %s exist? Nothing is written until a replica leads.",
                        self.where, exc, self.config.namespace)
        else:
            log.info("%s could not be read or renewed (%s); retrying every %gs.", self.where, exc,
                     self.config.retry_period)

    async def release(self) -> None:
        """On a graceful stop: give the Lease up (empty holder), so a standby takes over at its next read."""
        self._released = True
        if not self.leading:
            return
        self.leading = False
        self.on_change(False)
        try:
            async with self._turn:  # after an attempt on its way: its renewal must not land after the release
                await asyncio.to_thread(self._release)
        except rest.ApiError as exc:
            log.info("Could not release %s (%s): a standby takes over when it expires (%gs).", self.where, exc,
                     self.config.lease_duration)
            return
        log.info("Released %s: a standby takes over at its next read.", self.where)

    def _release(self) -> None:
        lease = rest.request(self.api, "GET", self.path)
        spec = lease.get("spec") or {}
        if spec.get("holderIdentity") != self.identity:
            return
        now = micro_time(time.time())
        lease["spec"] = {**spec, "holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": now,
                         "acquireTime": now}
        rest.request(self.api, "PUT", self.path, body=lease)
