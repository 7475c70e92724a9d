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
