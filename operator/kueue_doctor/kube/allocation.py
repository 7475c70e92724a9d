"""Pausing Python's cyclic garbage collector while a pass allocates.

Building the state and diagnosing allocate hundreds of thousands of short-lived dicts and lists but no
reference cycles: reference counting frees them all. The cyclic collector, triggered by those
allocations, would only walk the large and long-lived objects again and again (a quarter of a pass
over 10,000 Workloads, measured in bench/engine.py). Cycles made meanwhile are collected once it is
back on.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def cycle_collection_paused() -> Iterator[None]:
    """Pause the cyclic collector for the block; leave it as it was (a caller may have it off already)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
