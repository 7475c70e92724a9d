"""glibc's allocator told what a long-lived operator needs: two arenas, and freed memory handed back.

CPython keeps small objects in its own pools; everything larger (a LIST page's JSON, aiohttp's and the
official client's buffers, the tables of big dicts) comes from glibc malloc, which gives every thread that
allocates its own arena (up to 8 per core: the LIST, write and watch threads each get one) and returns freed
memory to the kernel only from the top of a heap, so what a start-up LIST or a resync freed stays resident.
Two arenas and a malloc_trim every TRIM_EVERY seconds took the operator's steady RSS at 10,000 Workloads /
50,000 Pods from 232 to 211 MiB after a resync, side by side in one run (docs/scale-history.md, session 18). Where
the C library is not glibc (musl, macOS) both are no-ops; MALLOC_ARENA_MAX in the environment wins over ARENAS.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
from functools import cache

M_ARENA_MAX = -8  # glibc's malloc.h
ARENAS = 2
TRIM_EVERY = 30.0  # seconds; a trim takes 0.2 ms when nothing was freed, 12 ms to hand back 190 MiB


@cache
def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None)  # the symbols the process is linked with: glibc's, when it is glibc
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None


def limit_arenas(arenas: int = ARENAS) -> bool:
    """At most `arenas` malloc arenas (True when set). Call before the first thread starts: threads that
    already have an arena keep it. MALLOC_ARENA_MAX set in the environment is left alone."""
    libc = _glibc()
    if libc is None or "MALLOC_ARENA_MAX" in os.environ:
        return False
    return bool(libc.mallopt(M_ARENA_MAX, arenas) == 1)


def trim() -> bool:
    """Hand the free pages of every arena back to the kernel (True when some were)."""
    libc = _glibc()
    return libc is not None and bool(libc.malloc_trim(0))


async def trim_periodically(every: float = TRIM_EVERY) -> None:
    """`trim` every `every` seconds, in a worker thread (it takes each arena's lock in turn), until cancelled."""
    if _glibc() is None:
        return
    while True:
        await asyncio.sleep(every)
        await asyncio.to_thread(trim)
