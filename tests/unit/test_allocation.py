"""A pass pauses the cyclic collector and leaves it as the caller had it."""

from __future__ import annotations

import gc
from datetime import UTC, datetime

import pytest

from kueue_doctor import diagnose_objects
from kueue_doctor.kube.allocation import cycle_collection_paused
from tests.builders import Workload

NOW = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize("enabled", [True, False])
def test_a_pass_leaves_the_collector_as_it_found_it(enabled: bool) -> None:
    (gc.enable if enabled else gc.disable)()
    try:
        diagnose_objects([Workload("job-a-1", "team-a").queue("q").obj()], NOW)
        assert gc.isenabled() is enabled
    finally:
        gc.enable()


def test_the_collector_is_back_on_after_an_error_in_the_block() -> None:
    with pytest.raises(RuntimeError), cycle_collection_paused():
        assert not gc.isenabled()
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_pass_leaves_objects_the_caller_froze_frozen() -> None:
    """A pre-fork server freezes its start-up objects; a pass must not thaw them (copy-on-write pages)."""
    gc.collect()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        diagnose_objects([Workload("job-a-1", "team-a").queue("q").obj()], NOW)
        # frozen objects that die meanwhile leave the count; a thaw would empty it
        assert frozen > 0 and gc.get_freeze_count() > frozen // 2
    finally:
        gc.unfreeze()


def test_what_survives_a_pass_is_not_walked_again_when_the_collector_resumes_and_cycles_are_still_freed() -> None:
    """The verdicts of 10,000 Workloads are alive when the pass ends: resuming must not start a collection that
    walks them all only to find them alive (a twentieth of a pass); a cycle made in the pass is still freed."""
    class Node:
        def __init__(self) -> None:
            self.me = self  # a reference cycle: only the cyclic collector frees it

    collections: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.collect()
    gc.callbacks.append(seen)
    try:
        with cycle_collection_paused():
            kept = [[n] for n in range(5000)]
            probe = [Node()]
        more = [[n] for n in range(50)]  # the next allocations, as the caller goes on
    finally:
        gc.callbacks.remove(seen)
    assert collections == []
    probe.clear()
    assert gc.collect() >= 1  # the cycle made in the block is freed by a full collection
    assert len(kept) == 5000 and len(more) == 50


def test_the_operators_passes_promote_nothing_so_full_collections_keep_their_pace() -> None:
    # the operator diagnoses named Workloads pass after pass: nothing it holds is moved to the oldest generation
    # behind the collector's back (its garbage cycles would wait ever longer for a full collection)
    gc.collect()
    young = [[] for _ in range(50)]
    before = gc.get_count()[0]
    with cycle_collection_paused(promote_survivors=False):
        pass
    assert gc.get_count()[0] >= before and young
