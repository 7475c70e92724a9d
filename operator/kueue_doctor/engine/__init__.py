"""The diagnosis engine: pure functions from objects to verdicts (see `diagnose.py`)."""

from __future__ import annotations

__all__ = ["clear_parse_caches"]


def clear_parse_caches() -> None:
    """Empty every memo of message, Pod, time, quantity and label parsing, so that the next pass starts cold.

    The parsers memoise because Kueue and kube-scheduler repeat a few texts across thousands of objects;
    results are immutable, so the memos never need clearing for correctness. A benchmark round that
    measures a first pass (bench/engine.py) empties them here.
    """
    from ..kube import objects, quantity
    from . import diagnose, messages, pods

    for cache in (messages._parse_cached, pods._parse_cached, objects._parse_time, objects.format_time,
                  objects._time_text, quantity._parse, quantity.format_quantity, diagnose._label):
        cache.cache_clear()
