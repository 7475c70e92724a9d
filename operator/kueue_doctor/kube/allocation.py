"""Pausing Python's cyclic garbage collector while a pass allocates.

Building the state and diagnosing allocate hundreds of thousands of short-lived dicts and lists but no
reference cycles: reference counting frees them all. The cyclic collector, triggered by those
allocations, would only walk the large and long-lived objects again and again (a quarter of a pass
over 10,000 Workloads, measured in bench/engine.py).

Turned back on as it was, the collector's first young collection would walk everything the pass made and
still holds (the verdicts: a twentieth of a pass) only to find them alive. So what survived the block goes
straight to the oldest generation (`gc.freeze` + `gc.unfreeze` move the generations' lists, no walk); cycles
made meanwhile, if any, are collected by the next full collection. Skipped when the caller froze objects of
its own (a pre-fork server): unfreezing would undo that.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def cycle_collection_paused(promote_survivors: bool = True) -> Iterator[None]:
    """Pause the cyclic collector for the block; leave it as it was (a caller may have it off already).

    `promote_survivors=False` for a long-lived process's many small passes (the operator's): promotion moves
    every tracked object, the event loop's garbage cycles too, to the oldest generation without counting them
    towards the next full collection, which would then come ever later."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if promote_survivors and not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()
