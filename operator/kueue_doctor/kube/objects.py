"""Tolerant accessors for plain-dict Kubernetes objects (what `kubectl get -o json` returns).

Every accessor returns a typed default instead of raising: the engine must survive any input.
Field access, times and durations live here once: the engine's rules, the Pod parser
(`engine/pods/`) and the CLI use these accessors rather than private copies.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

Obj = Mapping[str, Any]
EMPTY: Mapping[str, Any] = {}

# Kueue's API group, also the prefix of its labels, annotations and scheduling gates.
KUEUE_GROUP = "kueue.x-k8s.io"
# What kube-scheduler and Kueue append to a message they cut at their size limit; `clip` cuts the same way.
TRUNCATION_SUFFIX = " ..."


def m(value: object) -> Mapping[str, Any]:
    if type(value) is dict:  # the common case, without the slow ABC check
        return value
    if value is None:  # an absent field: as common, and isinstance(None, Mapping) is the slow ABC path
        return EMPTY
    return value if isinstance(value, Mapping) else EMPTY


def lst(value: object) -> list[Any]:
    return value if type(value) is list or isinstance(value, list) else []


def s(value: object) -> str | None:
    return value if type(value) is str and value else None


def i(value: object, default: int = 0) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return default


def int_or_none(value: object) -> int | None:
    """A JSON integer as it is, None for anything else (bools and digit strings too).

    For integer fields where absent and 0 differ (a container's `exitCode`); `i` gives a default instead.
    """
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# The accessors below are asked hundreds of times per Workload: each takes the plain-dict path inline and
# leaves anything else to `m`/`s` (one Python call less per field read; the results are the same).


def meta(obj: Obj) -> Mapping[str, Any]:
    value = obj.get("metadata")
    return value if type(value) is dict else m(value)


def name(obj: Obj) -> str | None:
    md = obj.get("metadata")
    value = (md if type(md) is dict else m(md)).get("name")
    return value if type(value) is str and value else None


def namespace(obj: Obj) -> str | None:
    md = obj.get("metadata")
    value = (md if type(md) is dict else m(md)).get("namespace")
    return value if type(value) is str and value else None


def ns_name(obj: Obj) -> tuple[str, str]:
    """(namespace, name), "" for either when absent: the key namespaced objects are kept and joined by."""
    return namespace(obj) or "", name(obj) or ""


def uid(obj: Obj) -> str | None:
    md = obj.get("metadata")
    value = (md if type(md) is dict else m(md)).get("uid")
    return value if type(value) is str and value else None


def labels(obj: Obj) -> Mapping[str, Any]:
    md = obj.get("metadata")
    value = (md if type(md) is dict else m(md)).get("labels")
    return value if type(value) is dict else m(value)


def spec(obj: Obj) -> Mapping[str, Any]:
    value = obj.get("spec")
    return value if type(value) is dict else m(value)


def status(obj: Obj) -> Mapping[str, Any]:
    value = obj.get("status")
    return value if type(value) is dict else m(value)


def group_of(api_version: object) -> str:
    text = s(api_version) or ""
    return text.rsplit("/", 1)[0] if "/" in text else ""


def version_of(api_version: object) -> str:
    text = s(api_version) or ""
    return text.rsplit("/", 1)[-1]


def parse_time(value: object) -> datetime | None:
    """RFC 3339 (with or without fractions, Z or offset) to an aware datetime; None when unreadable. A datetime
    (an unquoted timestamp of a hand-written YAML file, as a YAML loader hands it over) is taken as it is."""
    if type(value) is not str:
        return _datetime(value) if isinstance(value, datetime) else None
    if not value or len(value) > 64:
        return None
    return _parse_time(value)


# Times outside these years are no object's: Go's zero time (0001-01-01, "never set" written out by a tool) and
# the far future, which any threshold added to would overflow
_YEARS = range(1970, 9000)


@lru_cache(maxsize=65536)
def _parse_time(value: str) -> datetime | None:
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return _datetime(parsed)


def _datetime(value: datetime) -> datetime | None:
    if value.year not in _YEARS:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def as_time(value: object) -> datetime | None:
    """`parse_time`, and a datetime as it is (naive means UTC): what a caller or a YAML loader hands over."""
    if type(value) is str:  # `parse_time`'s checks inline: asked for several times of every Pod
        return _parse_time(value) if value and len(value) <= 64 else None
    if isinstance(value, datetime):
        return _datetime(value)
    return None


def later(since: datetime, seconds: float) -> datetime | None:
    """`since` plus `seconds` (a limit or timeout read from an object or Kueue's Configuration); None when that is
    past year 9999, which no clock reaches: a limit that never passes."""
    try:
        return since + timedelta(seconds=seconds)
    except OverflowError:
        return None


def earliest(a: datetime | None, b: datetime | None) -> datetime | None:
    """The earlier of two times; a missing one does not count."""
    if a is None:
        return b
    if b is None:
        return a
    return a if a <= b else b


@lru_cache(maxsize=65536)
def format_time(value: datetime | None) -> str | None:
    if value is None:
        return None
    # "+00:00" replaced by "Z": one C call fewer than dropping microseconds and zone with `replace` (most times
    # are formatted once: each Workload's own)
    return value.astimezone(UTC).isoformat(timespec="seconds")[:-6] + "Z"


def time_text(value: object) -> str | None:
    """`format_time(parse_time(value))`: a timestamp of an object as kueue-doctor writes times, in one lookup."""
    if type(value) is str:
        return _time_text(value)
    return format_time(parse_time(value)) if isinstance(value, datetime) else None


def when_text(value: datetime | None) -> str:
    """A time as a message writes it: `format_time`, or words when the object carries no readable time (a
    condition without lastTransitionTime, a hand-edited timestamp), never "None"."""
    return format_time(value) or "an unknown time"


@lru_cache(maxsize=65536)
def _time_text(value: str) -> str | None:
    parsed = parse_time(value)
    # "2026-11-30T09:08:48Z", the apiserver's form, is already what format_time writes: no formatting
    if parsed is not None and len(value) == 20 and value[4::3] == "--T::Z" and value.isascii():
        return value
    return format_time(parsed)


# "v1.6.2", "1.6.2-rc.1", or an image "registry.k8s.io/kueue/kueue:v0.19.0[@sha256:...]"; not a digest or a port
_RELEASE = re.compile(r"(?:^|:)v?(\d+)\.(\d+)\.(\d+)(?:[-+@]|$)")


def release(text: object) -> tuple[int, int, int] | None:
    """(major, minor, patch) of a release tag or of an image's tag, a pre-release counted as its release; None
    for anything else (a branch, a digest alone), which callers treat as "version unknown"."""
    found = _RELEASE.search(s(text) or "")
    return (int(found[1]), int(found[2]), int(found[3])) if found else None


_PART = re.compile(r"(\d+(?:\.\d+)?)(h|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0}


def parse_duration(text: str) -> int | None:
    """Seconds of a Go-style duration (2h, 90m, 1h30m, 45s, 1.5h); None for anything else (or zero)."""
    value = text.strip()
    if not value or _PART.sub("", value):
        return None
    seconds = sum(float(n) * _UNITS[u] for n, u in _PART.findall(value))
    return int(seconds) if seconds >= 1 else None


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def format_duration(value: timedelta | int, precise: bool = False) -> str:
    """A compact duration from a timedelta or whole seconds; negative durations are "0s".

    Default, one unit: "45s" below 2 minutes, "17m" below 2 hours, "5h" below 2 days, then "3d"
    (the Pod summary: "7 Unschedulable for 17m"). `precise`: "45s" below 90 seconds, "17m" below
    2 hours, then two units, "3h05m" and "2d4h" (the engine's messages and the CLI's FOR column).
    """
    seconds = max(0, int(value.total_seconds()) if isinstance(value, timedelta) else int(value))
    if precise:
        if seconds < 90:
            return f"{seconds}s"
        minutes = seconds // 60
        if minutes < 120:
            return f"{minutes}m"
        hours, minutes = divmod(minutes, 60)
        if hours < 48:
            return f"{hours}h{minutes:02d}m"
        days, hours = divmod(hours, 24)
        return f"{days}d{hours}h"
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 120 * 60:
        return f"{seconds // 60}m"
    if seconds < 48 * 3600:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def conditions(obj: Obj) -> dict[str, Mapping[str, Any]]:
    """Conditions by type; the last one wins when a broken object repeats a type."""
    out: dict[str, Mapping[str, Any]] = {}
    for cond in lst(status(obj).get("conditions")):
        if type(cond) is dict or isinstance(cond, Mapping):  # the common case first: the ABC check is slow
            ctype = cond.get("type")
            if type(ctype) is str and ctype:
                out[ctype] = cond
    return out


def is_true(cond: Mapping[str, Any] | None) -> bool:
    if type(cond) is dict:  # the common case (an empty dict has no status either)
        return cond.get("status") == "True"
    return bool(cond) and m(cond).get("status") == "True"


def is_false(cond: Mapping[str, Any] | None) -> bool:
    return bool(cond) and m(cond).get("status") == "False"


def owner_refs(obj: Obj) -> Iterator[Mapping[str, Any]]:
    for ref in lst(meta(obj).get("ownerReferences")):
        if type(ref) is dict or isinstance(ref, Mapping):  # the common case first: the ABC check is slow
            yield ref


def controller_ref(obj: Obj) -> Mapping[str, Any] | None:
    refs = lst(meta(obj).get("ownerReferences"))
    if len(refs) == 1 and type(refs[0]) is dict:  # the common case: one owner, no generator
        return refs[0]
    found = list(owner_refs(obj))
    for ref in found:
        if ref.get("controller") is True:
            return ref
    return found[0] if len(found) == 1 else None


def workload_owner_ref(workload: Obj) -> Mapping[str, Any] | None:
    """The owner a Workload was made for: its controller, else its one owner that is not a Pod (Kueue gives a
    StatefulSet's or LeaderWorkerSet's group Workload the owner and each member Pod as plain owners)."""
    ref = controller_ref(workload)
    if ref is not None:
        return ref
    others = [r for r in owner_refs(workload) if r.get("kind") != "Pod"]
    return others[0] if len(others) == 1 else None


_HASH_LABEL = "pod-template-hash"  # the Deployment controller's: its ReplicaSet is named <deployment>-<hash>


def deployment_of(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """(Deployment, ReplicaSet) of a Pod a Deployment made, read from its controller and its template hash."""
    template_hash = s(labels(pod).get(_HASH_LABEL))
    for ref in owner_refs(pod):
        rs = s(ref.get("name")) or ""
        if ref.get("controller") is True and ref.get("kind") == "ReplicaSet" and template_hash \
                and rs.endswith(f"-{template_hash}"):
            return rs[: -len(template_hash) - 1], rs
    return None


def priority(workload: Obj) -> int:
    """A Workload's spec.priority (an int32 Kueue resolved from its priority class), 0 when unset or not an int."""
    p = spec(workload).get("priority")
    return p if isinstance(p, int) and not isinstance(p, bool) else 0


PRIORITY_BOOST = "kueue.x-k8s.io/priority-boost"


def priority_boost(workload: Obj) -> int:
    """The kueue.x-k8s.io/priority-boost annotation as an int32 (Kueue's webhook refuses any other), 0 when absent."""
    value = s(m(meta(workload).get("annotations")).get(PRIORITY_BOOST)) or ""
    return int(value) if re.fullmatch(r"[+-]?\d{1,10}", value) and -2**31 <= int(value) < 2**31 else 0


def effective_priority(workload: Obj, boost: bool) -> int:
    """Kueue's utilpriority.EffectivePriority: spec.priority plus the priority-boost annotation, which counts only
    with the PriorityBoost feature gate on (it orders the queue and chooses preemption victims)."""
    return priority(workload) + (priority_boost(workload) if boost else 0)


def pod_owner_refs(workload: Obj) -> list[Mapping[str, Any]] | None:
    """The Pods owning a Workload of Kueue's Pod integration (one for a plain Pod, every member for a Pod group);
    None when it has no owner or any owner is not a Pod (a Job's, or a StatefulSet's group Workload)."""
    refs = list(owner_refs(workload))
    if refs and all(r.get("kind") == "Pod" and r.get("apiVersion") == "v1" for r in refs):
        return refs
    return None


def closed(text: str) -> str:
    """`text` ended by a full stop, unless it already ends in punctuation: a quoted message often does ("Capacity
    is not found, CA will try to find it later.")."""
    return text if text.rstrip().endswith((".", "!", "?", "…")) else text + "."


def clip(text: object, limit: int = 1024) -> str | None:
    if not isinstance(text, str) or not text:
        return None
    return text if len(text) <= limit else text[: limit - len(TRUNCATION_SUFFIX)] + TRUNCATION_SUFFIX
