"""Which diagnoses read a ClusterQueue's status numbers (`diagnose(numbers=...)`).

The operator re-diagnoses, when Kueue rewrites only a ClusterQueue's numbers (reservations, usage, counts, shares:
on every admission), only the waiting Workloads whose last diagnosis read them (live/inbox.py). A rule that reads
the numbers without counting the read (`ClusterState.read_numbers`, a `Derived(..., numbers=True)` table) would
leave such a Workload's diagnosis stale until the next resync: every scenario here, with its ClusterQueues' numbers
changed in three ways, shows whose diagnosis changed, and each of those must have been reported as a reader.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from kueue_doctor.engine.diagnose import diagnose
from kueue_doctor.kube.load import newest_timestamp
from kueue_doctor.state import ClusterState

_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?([eE][0-9]+|[a-zA-Z]{1,2})?$")


def _leaves(value: Any, change: Callable[[Any], Any]) -> Any:
    if isinstance(value, dict):
        return {k: _leaves(v, change) for k, v in value.items()}
    if isinstance(value, list):
        return [_leaves(v, change) for v in value]
    return change(value)


def _numbers(change: Callable[[Any], Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A ClusterQueue with every number of its status but the conditions changed by `change`."""
    def perturb(status: dict[str, Any]) -> dict[str, Any]:
        return {k: (v if k == "conditions" else _leaves(v, change)) for k, v in status.items()}
    return perturb


def _zero(v: Any) -> Any:
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        return 0
    return "0" if isinstance(v, str) and _QUANTITY.match(v) else v


def _grow(v: Any) -> Any:
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        return v * 3 + 7
    return "977" if isinstance(v, str) and _QUANTITY.match(v) else v


def _only_conditions(status: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in status.items() if k == "conditions"}


PERTURBATIONS = {"zeroed": _numbers(_zero), "grown": _numbers(_grow), "dropped": _only_conditions}


def _with_numbers(objects: Iterable[Mapping[str, Any]], perturb: Callable[[dict[str, Any]], dict[str, Any]]
                  ) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for obj in objects:
        if obj.get("kind") == "ClusterQueue" and isinstance(obj.get("status"), dict):
            obj = copy.deepcopy(dict(obj))
            obj["status"] = perturb(obj["status"])
        out.append(obj)
    return out


def _by_key(diagnoses: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in diagnoses}


def _unreported(objects: list[Mapping[str, Any]], now: datetime) -> tuple[list[str], int]:
    """(Workloads whose diagnosis moved with the numbers though not reported as reading them, how many moved)."""
    readers: set[tuple[str, str]] = set()
    base = _by_key(diagnose(ClusterState.from_objects(objects), now, grace=timedelta(0), numbers=readers))
    wrong, moved = [], 0
    for how, perturb in PERTURBATIONS.items():
        changed = _by_key(diagnose(ClusterState.from_objects(_with_numbers(objects, perturb)), now,
                                   grace=timedelta(0)))
        for key, d in changed.items():
            if d != base.get(key):
                moved += 1
                if key not in readers:
                    wrong.append(f"{key[0]}/{key[1]} ({how}): {base.get(key, {}).get('status', {}).get('message')!r}"
                                 f" -> {d['status'].get('message')!r}")
    return wrong, moved


def test_every_catalog_diagnosis_that_moves_with_the_numbers_was_reported_as_reading_them() -> None:
    from tests.unit.test_catalog import PASSING, gen

    wrong, moved = [], 0
    for s in PASSING:
        found, n = _unreported(s["objects"], gen.parse_now(s["now"]))
        wrong += [f"{s['name']}: {w}" for w in found]
        moved += n
    assert not wrong, "\n".join(wrong)
    assert moved >= 50  # the perturbations reach what the quota rules quote


def test_every_recorded_fixture_diagnosis_that_moves_with_the_numbers_was_reported_as_reading_them() -> None:
    wrong = []
    for path in sorted((Path(__file__).parents[1] / "e2e" / "fixtures").glob("*.yaml")):
        docs = [o for o in yaml.safe_load_all(path.read_text()) if isinstance(o, dict)]
        objects = [i for o in docs for i in (o.get("items") or [o])]
        found, _ = _unreported(objects, newest_timestamp(objects))
        wrong += [f"{path.name}: {w}" for w in found]
    assert not wrong, "\n".join(wrong)


def test_a_workload_kueue_never_evaluated_reads_no_numbers_one_short_of_quota_does() -> None:
    # the waiting Workloads of Kueue's own perf scenarios: thousands never evaluated yet, whose diagnosis says so
    # whatever the queue's usage; a numbers round re-diagnosing each of them every 10 s was most of the operator's
    # CPU (docs/scale.md, session 26)
    from tests.unit.test_engine import NOW, pending, queue_setup, team_a_cq, workload

    cq = team_a_cq("4").reservation("default-flavor", "cpu", "3").workloads(reserving=1, admitted=1)
    short = pending("couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
                    "default-flavor, 2 more needed").count(2).obj()
    fresh = workload("fresh").created("2026-11-30T09:59:00Z").obj()  # a minute old: Kueue is not stalled
    objects = [*queue_setup(cq), short, fresh]
    readers: set[tuple[str, str]] = set()
    out = _by_key(diagnose(ClusterState.from_objects(objects), NOW, numbers=readers))
    assert out["team-a", "fresh"]["status"]["reason"] == "NotYetEvaluated"
    assert out["team-a", "job-sample-1a2b3"]["status"]["reason"] == "WaitingForQuota"
    assert readers == {("team-a", "job-sample-1a2b3")}
