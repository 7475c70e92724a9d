"""The operator hands memory its LISTs and passes freed back to the kernel (live/heap.py), on glibc."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kueue_doctor.live import heap

OPERATOR = Path(__file__).resolve().parents[2] / "operator"
GLIBC = heap._glibc() is not None

# In a fresh process (its heap is its own): 2,000 buffers of 64 KiB (below glibc's mmap threshold, so they come
# from an arena) each followed by a small one that stays, as a LIST page's JSON is followed by the projections
# kept of it; the big ones are freed. Their pages sit between live chunks: without a trim they stay resident.
CHILD = """
import json, os, sys
from kueue_doctor.live import heap
arenas = heap.limit_arenas()
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
kept, big = [], []
for i in range(2000):
    big.append(b"x" * 65536)
    kept.append(b"y" * 1024)
before = rss()
del big
freed = rss()
trimmed = heap.trim()
after = rss()
print(json.dumps({"arenas": arenas, "before": before, "freed": freed, "after": after, "trimmed": trimmed}))
"""


def _child(env: dict[str, str]) -> dict[str, int]:
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True, timeout=60,
                         env={**env, "PYTHONPATH": str(OPERATOR)})
    result: dict[str, int] = json.loads(out.stdout)
    return result


@pytest.mark.skipif(not GLIBC, reason="the C library is not glibc: live/heap.py does nothing")
def test_memory_freed_between_live_objects_is_handed_back_to_the_kernel_by_a_trim() -> None:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    r = _child(env)
    assert r["arenas"] is True
    mib = 1 << 20
    # ~125 MiB freed in the middle of the heap: most of it is returned, and the trim returns what free() kept (how
    # much free() itself gives back depends on the heap's layout: 0 to ~60 MiB of it on the machines seen)
    assert r["before"] - r["after"] > 100 * mib, r
    assert r["freed"] - r["after"] > 40 * mib, r
    assert r["trimmed"] is True


@pytest.mark.skipif(not GLIBC, reason="the C library is not glibc: live/heap.py does nothing")
def test_malloc_arena_max_set_by_the_user_wins() -> None:
    r = _child({**os.environ, "MALLOC_ARENA_MAX": "4"})
    assert r["arenas"] is False
