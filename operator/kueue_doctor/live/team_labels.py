"""Team labels on the metrics: `--metric-label-from LABEL` copies a Kubernetes label into the per-queue metrics
as `custom_<name>`, the naming of Kueue's custom metric labels (KEP-7066), so both can be joined by team.

The value is the Workload's label, else its LocalQueue's, else its ClusterQueue's (for an owner Kueue made no
Workload for: the owner's label first). The name is the label key sanitized as KEP-7066 describes: every
character outside [A-Za-z0-9_] becomes `_`, then `custom_` is prefixed (`team` -> `custom_team`,
`example.com/cost-center` -> `custom_example_com_cost_center`); `NAME=LABEL` names it explicitly, as Kueue's
`name` + `sourceLabelKey` do (`cost_center=example.com/cost-center` -> `custom_cost_center`).

Bounded: at most `cap` distinct values per label are exported. Values in use keep their place; a new value takes
a free place (in sorted order) while there is one, and the rest are counted under Kueue's own bucket for values
it does not track, `kueue.x-k8s.io/_UNTRACKED_VALUE_`. A missing label is the empty value, as in Kueue.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

OTHER_VALUE = "kueue.x-k8s.io/_UNTRACKED_VALUE_"  # Kueue's value for what it does not track (configuration_types.go)
DEFAULT_LABEL_VALUES = 50
PREFIX = "custom_"

_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9_]*$")  # Kueue's rule for an explicit name
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True)
class LabelSpec:
    """One `--metric-label-from`: the Kubernetes label key read and the Prometheus label written."""

    key: str
    metric_label: str


def _valid_key(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_LABEL_NAME.match(name))


def parse_specs(values: Iterable[str]) -> list[LabelSpec]:
    """The specs of `--metric-label-from` (LABEL or NAME=LABEL); ValueError naming the bad one."""
    specs: list[LabelSpec] = []
    for value in values:
        name, sep, key = value.partition("=")
        if not sep:
            name, key = re.sub(r"[^A-Za-z0-9_]", "_", value), value
        if not _valid_key(key):
            raise ValueError(f"--metric-label-from {value!r}: {key!r} is not a Kubernetes label key (name, or "
                             "prefix/name, e.g. team or example.com/cost-center)")
        if sep and not _NAME.match(name):
            raise ValueError(f"--metric-label-from {value!r}: the name {name!r} must match ^[a-zA-Z][a-zA-Z0-9_]*$ "
                             "(as Kueue's customLabels name), e.g. cost_center=example.com/cost-center")
        spec = LabelSpec(key, PREFIX + name)
        clash = next((s for s in specs if s.metric_label == spec.metric_label), None)
        if clash is not None:
            raise ValueError(f"--metric-label-from: labels {clash.key!r} and {key!r} both become "
                             f"{spec.metric_label}; name one explicitly: NAME={key}")
        specs.append(spec)
    return specs


def _labels(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    md = (obj or {}).get("metadata")
    found = md.get("labels") if isinstance(md, Mapping) else None
    return found if isinstance(found, Mapping) else {}


def raw_values(specs: Sequence[LabelSpec], sources: Sequence[Mapping[str, Any] | None]) -> tuple[str, ...]:
    """Per spec, the label of the first source (Workload or owner, LocalQueue, ClusterQueue) that has it."""
    out = []
    for spec in specs:
        value = next((str(v) for v in (_labels(src).get(spec.key) for src in sources) if v is not None), "")
        out.append(value)
    return tuple(out)


class BoundedValues:
    """At most `cap` distinct exported values per label, the rest under OTHER_VALUE; thread-safe (scrapes may
    run at once)."""

    def __init__(self, specs: Sequence[LabelSpec], cap: int) -> None:
        self.cap = max(cap, 1)
        self._kept: list[set[str]] = [set() for _ in specs]
        self._lock = threading.Lock()

    def refresh(self, in_use: Iterable[tuple[str, ...]]) -> None:
        """Keep the values still in use; admit new ones (sorted) into the free places."""
        seen: list[set[str]] = [set() for _ in self._kept]
        for row in in_use:
            for n, v in enumerate(row):
                seen[n].add(v)
        with self._lock:
            for n, values in enumerate(seen):
                values.discard("")  # a missing label is always exported as the empty value
                kept = self._kept[n] & values
                for v in sorted(values - kept):
                    if len(kept) >= self.cap:
                        break
                    kept.add(v)
                self._kept[n] = kept

    def bounded(self, values: tuple[str, ...]) -> tuple[str, ...]:
        with self._lock:
            return tuple(v if v == "" or v in self._kept[n] else OTHER_VALUE for n, v in enumerate(values))
