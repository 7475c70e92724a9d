"""Where the operator's memory goes, asked of the running process (issue 12): tracemalloc on demand.

With `KUEUE_DOCTOR_TRACEMALLOC=<file>` in its environment, `kueue-doctor run` traces every allocation from its
start (one frame each: about 2x the memory, for a bench or a debugging session, never in production), and each
SIGUSR2 writes to `<file>` the live bytes grouped by source file and by line, Kopf, the kubernetes client and
aiohttp included. `bench/operator_scale.py --tracemalloc` sends it at the end of its idle window.
"""

from __future__ import annotations

import logging
import os
import signal
import tracemalloc
from pathlib import Path
from types import FrameType

ENV = "KUEUE_DOCTOR_TRACEMALLOC"
TOP = 40

logger = logging.getLogger(__name__)


def install_from_env() -> None:
    """Start tracing and install the SIGUSR2 writer when the environment asks for it; else nothing."""
    target = os.environ.get(ENV)
    if not target:
        return
    tracemalloc.start(1)
    signal.signal(signal.SIGUSR2, lambda _signum, _frame: _write(Path(target), _frame))
    logger.warning("tracemalloc is on (%s=%s): memory use is about doubled; send SIGUSR2 for a report", ENV, target)


def _write(target: Path, _frame: FrameType | None) -> None:
    snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
    traced, peak = tracemalloc.get_traced_memory()
    lines = [f"traced {traced / 2**20:.1f} MiB now, {peak / 2**20:.1f} MiB at peak"]
    for key in ("filename", "lineno"):
        stats = snapshot.statistics(key)
        lines.append(f"-- top {TOP} by {key} of {len(stats)}")
        lines += [f"{st.size / 2**20:9.2f} MiB {st.count:9d} blocks  {st.traceback}" for st in stats[:TOP]]
    tmp = target.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(target)  # a reader never sees half a report
