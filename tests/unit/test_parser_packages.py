"""The parser packages as their importers see them: the public names, and one switch for their memos."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from kueue_doctor import diagnose_objects
from kueue_doctor.engine import messages, pods
from kueue_doctor.engine.diagnose import clear_parse_caches
from kueue_doctor.kube import objects, quantity
from kueue_doctor.kube.load import load_files

EXAMPLE = Path(__file__).parents[2] / "examples" / "headlamp-exceeds-max-quota.yaml"

# What engine/, live/, the CLI, hack/, the bench and the tests import from the packages: the split into
# modules must keep every one of them importable as `messages.X` / `pods.X`.
MESSAGES_NAMES = (
    "CONDITION_MESSAGE_LIMIT", "EVENT_MESSAGE_LIMIT", "FailureKind", "FlavorAttempt", "FlavorFailure",
    "ParsedMessage", "PreemptedWorkloadEvent", "PreemptionInfo", "Template", "parse_cluster_queue_inactive",
    "parse_flavors_considered", "parse_preempted_workload_event", "parse_workload_message", "split_name_list",
)
PODS_NAMES = (
    "BENIGN_WAITING_REASONS", "CATEGORIES", "DEFAULT_SCHEDULING_GATED_MESSAGE", "KUEUE_GATES", "MESSAGE_LIMIT",
    "NO_NODES_MESSAGE", "NodeFitReason", "PodBlocker", "PodSummary", "SchedulingFailure", "event_count",
    "event_first_time", "event_message", "event_time", "is_kueue_gate", "job_failed_create",
    "parse_scheduler_message", "parse_time", "summarize_pods",
)


@pytest.mark.parametrize(("package", "names"), [(messages, MESSAGES_NAMES), (pods, PODS_NAMES)],
                         ids=["messages", "pods"])
def test_the_package_exports_every_name_its_importers_use(package: ModuleType, names: tuple[str, ...]) -> None:
    assert set(names) <= set(package.__all__)
    for name in names:
        assert getattr(package, name) is not None, name


def _modules(package: ModuleType) -> list[ModuleType]:
    return [package] + [importlib.import_module(f"{package.__name__}.{info.name}")
                        for info in pkgutil.iter_modules(package.__path__)]


def _memos() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for module in (*_modules(messages), *_modules(pods), objects, quantity):
        for value in vars(module).values():
            if callable(getattr(value, "cache_clear", None)) and callable(getattr(value, "cache_info", None)):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


def test_clear_parse_caches_empties_every_parse_memo() -> None:
    diagnose_objects(load_files([str(EXAMPLE)]))
    pods.parse_scheduler_message("0/3 nodes are available: 3 Insufficient cpu.")
    memos = _memos()
    # the memos bench/engine.py empties by hand today, and any a parser module adds later
    assert {"kueue_doctor.engine.messages.workload._parse_cached", "kueue_doctor.engine.pods.scheduler._parse_cached",
            "kueue_doctor.kube.objects._parse_time", "kueue_doctor.kube.objects.format_time",
            "kueue_doctor.kube.quantity._parse", "kueue_doctor.kube.quantity.format_quantity"} <= set(memos)
    assert all(memo.cache_info().currsize > 0 for memo in memos.values()), {
        k: m.cache_info() for k, m in memos.items()}
    clear_parse_caches()
    assert {k: m.cache_info().currsize for k, m in memos.items()} == dict.fromkeys(memos, 0)
