"""The compiled engine (setup.py with KUEUE_DOCTOR_COMPILE=1, what the image ships) gives the same answers as the
pure-Python one: the whole unit suite (catalog, message corpora, replayed fixtures, properties) passes on it, and
both write identical diagnoses for the benchmark's three mixes.

`bash hack/compiled.sh` builds it outside the work tree (hack/test.sh does, before pytest; about 3 minutes cold).
Locally, when it is not built for this source, the tests skip and say how to build it; when CI requires them
(tests/prom.py `required`) they build it, and a build that fails (no mypy, no C compiler) fails them.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.prom import required

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site() -> Path:
    script = str(ROOT / "hack" / "compiled.sh")
    built = subprocess.run(["bash", script, "--print-if-built"], capture_output=True, text=True)
    if built.returncode == 0:
        return Path(built.stdout.strip())
    if not required():
        pytest.skip(f"the compiled package is not built for this source (3 minutes): bash {script}")
    run = subprocess.run(["bash", script], capture_output=True, text=True, timeout=900)
    if run.returncode != 0:
        msg = f"the compiled package could not be built (bash hack/compiled.sh): {run.stderr.strip()[-2000:]}"
        pytest.fail(msg)
    return Path(run.stdout.strip().splitlines()[-1])


def test_the_unit_suite_passes_on_the_compiled_package(site: Path) -> None:
    # KUEUE_DOCTOR_EXPECT_COMPILED: tests/unit/conftest.py fails the run unless the engine imported is compiled
    env = {**os.environ, "KUEUE_DOCTOR_EXPECT_COMPILED": "1"}
    run = subprocess.run([sys.executable, "-m", "pytest", "tests/unit", "-q", "-p", "no:cacheprovider", "-x",
                          "-o", f"pythonpath={site}"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=1200)
    assert run.returncode == 0, f"the unit suite fails on the compiled package:\n{run.stdout[-6000:]}{run.stderr[-2000:]}"


def _diagnoses(engine_path: Path) -> str:
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "engine.py"), "--engine-path", str(engine_path),
                          "--dump", "--workloads", "2000", "--queues", "20"],
                         cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_compiled_and_pure_engines_write_identical_diagnoses_on_the_three_mixes(site: Path) -> None:
    pure, compiled = _diagnoses(ROOT / "operator"), _diagnoses(site)
    assert pure.count('"kind": "AdmissionDiagnosis"') > 5000  # three mixes of 2,000 Workloads, and their stand-ins
    if pure != compiled:  # name the first Workload whose diagnosis differs, not 30 MB of text
        for a, b in zip(pure.splitlines(), compiled.splitlines(), strict=False):
            assert a == b, "the compiled engine's diagnosis differs"
    assert hashlib.sha256(pure.encode()).digest() == hashlib.sha256(compiled.encode()).digest()
