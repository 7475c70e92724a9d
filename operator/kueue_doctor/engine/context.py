"""What every rule may ask about one Workload: what every verdict writes read at once, the rest lazily, once.

A rule (`rules.py`) gets a `Context` and returns a `Finding` or None; the first rule that answers wins.
Facts that only some rules need are computed through `Context.lazy`, once per Workload, without
touching this module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, TypeVar

from ..api import MAX_TEXT
from ..kube.objects import (
    clip,
    conditions,
    format_time,
    is_true,
    m,
    parse_time,
    s,
    spec,
    status,
    time_text,
    workload_owner_ref,
)
from ..state import ClusterState
from . import messages, quota

T = TypeVar("T")
STAND_IN_ANNOTATION = "kueue-doctor.dev/no-workload"  # marks a stand-in Workload (no_workload.py); never written


def is_stand_in(workload: Mapping[str, Any]) -> bool:
    return m(m(workload.get("metadata")).get("annotations")).get(STAND_IN_ANNOTATION) == "true"


class Context:
    def __init__(self, workload: Mapping[str, Any], state: ClusterState, now: datetime) -> None:
        self.wl = workload
        self.state = state
        self.now = now
        md = m(workload.get("metadata"))  # once for the three names (`namespace`/`name`/`uid` each read it)
        self.ns = s(md.get("namespace")) or ""
        self.name = s(md.get("name")) or ""
        self.uid = s(md.get("uid")) or ""
        self.spec = spec(workload)
        self.status = status(workload)
        self.conds = conditions(workload)
        # an owner without a Workload, diagnosed in its place (`is_stand_in`, from the metadata at hand)
        self.stand_in = m(md.get("annotations")).get(STAND_IN_ANNOTATION) == "true"
        self._lazy: dict[Callable[[Context], Any], Any] = {}
        # the facts below are read on first use (most verdicts never need them), then kept: plain attributes that
        # stay unset (None, or False for `_owner_read`) until then, so that the compiled engine can keep this class
        # native (mypyc compiles no descriptor that replaces itself)
        self._qr_parsed: messages.ParsedMessage | None = None
        self._evicted_parsed: messages.ParsedMessage | None = None
        self._cq_text: str | None = None
        self._owner: Mapping[str, Any] | None = None
        self._owner_read = False
        self._pods: list[Mapping[str, Any]] | None = None
        self._requests: tuple[quota.Requests, str] | None = None
        self._priority: int | None = None
        # the first time at which the clock alone may change this verdict (a threshold not yet passed): the operator
        # looks at the Workload again then, instead of at the next resync (`after`)
        self.wake_at: datetime | None = None
        # ----- what every verdict writes (its queues, owner, creation): read here, not through a lazy property -----
        self.lq_name = s(self.spec.get("queueName"))
        self.lq = state.local_queues.get((self.ns, self.lq_name or ""))
        # the ClusterQueue it is admitted to, else its LocalQueue's
        self.cq_name = s(m(self.status.get("admission")).get("clusterQueue")) or (
            s(spec(self.lq).get("clusterQueue")) if self.lq is not None else None)
        self.cq = state.cluster_queues.get(self.cq_name or "")
        self.cohort = s(spec(self.cq).get("cohortName")) if self.cq else None
        self.owner_ref = workload_owner_ref(workload)
        self.created = parse_time(md.get("creationTimestamp"))

    def lazy(self, fact: Callable[[Context], T]) -> T:
        """`fact(self)`, computed on first use (a Pod summary, say), then kept for this Workload."""
        if fact not in self._lazy:
            self._lazy[fact] = fact(self)
        found: T = self._lazy[fact]  # typed by assignment: typing.cast would be one more Python call
        return found

    def after(self, since: datetime | None, threshold: timedelta) -> bool:
        """Whether `threshold` has passed since `since` (never, without a time). A threshold not yet passed is
        noted in `wake_at`: the verdict may change then with no event to say so."""
        if since is None:
            return False
        try:
            due = since + threshold
        except OverflowError:  # past year 9999: never, like a threshold of no time
            return False
        if self.now >= due:
            return True
        if self.wake_at is None or due < self.wake_at:
            self.wake_at = due
        return False

    # ----- conditions -----
    def cond(self, ctype: str) -> Mapping[str, Any] | None:
        return self.conds.get(ctype)

    def true(self, ctype: str) -> bool:
        return is_true(self.conds.get(ctype))

    def cond_time(self, ctype: str) -> datetime | None:
        c = self.conds.get(ctype)
        return parse_time(c.get("lastTransitionTime")) if c else None

    def cond_reason(self, ctype: str) -> str:
        return s(m(self.conds.get(ctype)).get("reason")) or ""

    def cond_message(self, ctype: str) -> str:
        return s(m(self.conds.get(ctype)).get("message")) or ""

    @property
    def qr_parsed(self) -> messages.ParsedMessage:
        if self._qr_parsed is None:
            self._qr_parsed = messages.parse_workload_message(self.cond_message("QuotaReserved"))
        return self._qr_parsed

    @property
    def evicted_parsed(self) -> messages.ParsedMessage:
        if self._evicted_parsed is None:
            self._evicted_parsed = messages.parse_workload_message(self.cond_message("Evicted"))
        return self._evicted_parsed

    # ----- queues -----
    @property
    def cq_text(self) -> str:
        """How messages name the ClusterQueue, also when the input lacks the LocalQueue that names it."""
        if self._cq_text is None:
            self._cq_text = f"ClusterQueue {self.cq_name}" if self.cq_name else \
                f"the ClusterQueue of LocalQueue {self.ns}/{self.lq_name} (the LocalQueue is not in the input)" \
                if self.lq_name else "its ClusterQueue (it names none: no status.admission, no spec.queueName)"
        return self._cq_text

    @property
    def owner(self) -> Mapping[str, Any] | None:
        if not self._owner_read:
            self._owner, self._owner_read = self.state.owner_of(self.wl), True
        return self._owner

    @property
    def pods(self) -> list[Mapping[str, Any]]:
        if self._pods is None:
            self._pods = self.state.pods_of(self.wl)
        return self._pods

    def _requests_read(self) -> tuple[quota.Requests, str]:
        if self._requests is None:
            self._requests = quota.workload_requests(self.wl)
        return self._requests

    @property
    def requests(self) -> quota.Requests:
        """Total requests per PodSet (Kueue's own numbers when it wrote them)."""
        return self._requests_read()[0]

    @property
    def requests_source(self) -> str:
        """"Kueue" (status.resourceRequests / admission) or "Estimate" (computed from the Pod templates)."""
        return self._requests_read()[1]

    @property
    def priority(self) -> int:
        if self._priority is None:
            self._priority = self.state.priority_of(self.wl)
        return self._priority

    # ----- evidence helpers -----
    def condition_evidence(self, ctype: str) -> dict[str, Any]:
        c = m(self.conds.get(ctype))
        out: dict[str, Any] = {"kind": "Workload", "name": self.name, "namespace": self.ns,
                               "field": f"condition/{ctype}"}
        # asked for most verdicts: each field set inline, in the order of the object
        reason, message, time = s(c.get("reason")), clip(c.get("message"), MAX_TEXT), \
            time_text(c.get("lastTransitionTime"))
        if reason is not None:
            out["reason"] = reason
        if message is not None:
            out["message"] = message
        if time is not None:
            out["time"] = time
        return out

    def object_evidence(self, kind: str, obj_name: str | None, field_: str, reason: str | None = None,
                        message: str | None = None, time: datetime | None = None,
                        ns: str | None = None) -> dict[str, Any]:
        return _drop_none({"kind": kind, "name": obj_name or "", "namespace": ns, "field": field_,
                           "reason": reason, "message": clip(message, MAX_TEXT), "time": format_time(time)})

    def workload_ref(self, role: str, ns: str | None, wl_name: str | None, wl_uid: str | None) -> dict[str, Any]:
        return _drop_none({"role": role, "namespace": ns, "name": wl_name, "uid": wl_uid})


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}
