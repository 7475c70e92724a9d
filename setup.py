"""Builds kueue-doctor; with KUEUE_DOCTOR_COMPILE=1, compiles the pure modules with mypyc.

pyproject.toml holds the project's metadata; this file only adds the compiled extensions. The engine reads
every Workload on every pass, and compiled it runs 1.4-1.7x faster with the same verdicts (bench/engine.py
--compiled measures both in one run; tests/compiled/test_compiled.py checks the verdicts are identical). The
image ships compiled (hack/image/build.sh); a plain `pip install` stays pure Python and needs no compiler.

Compiling needs mypy (which holds mypyc; the `test` extra installs it) and a C compiler, and is built without
build isolation: `KUEUE_DOCTOR_COMPILE=1 pip wheel --no-build-isolation --no-deps .` (hack/compiled.sh).
"""

from __future__ import annotations

import os
from pathlib import Path

from setuptools import setup

# What runs per object or per Workload, free of I/O: the engine and the state it reads. Not compiled: the I/O
# layers (live/, cli, the loaders) and the pydantic models.
COMPILED = ("kueue_doctor/engine", "kueue_doctor/state.py", "kueue_doctor/kube/objects.py",
            "kueue_doctor/kube/quantity.py", "kueue_doctor/kube/packed.py", "kueue_doctor/kube/slim.py",
            "kueue_doctor/kube/selectors.py", "kueue_doctor/kube/kueue_names.py")


def compiled_sources(root: Path) -> list[str]:
    """The source files mypyc compiles, relative to `root` (the directory holding this file)."""
    out: list[str] = []
    for entry in COMPILED:
        path = root / "operator" / entry
        out += [str(f.relative_to(root)) for f in (sorted(path.rglob("*.py")) if path.is_dir() else [path])]
    return out


def extensions() -> list[object]:
    if os.environ.get("KUEUE_DOCTOR_COMPILE") != "1":
        return []
    try:
        from mypyc.build import mypycify
    except ImportError as exc:
        raise SystemExit("KUEUE_DOCTOR_COMPILE=1 needs mypyc, which comes with mypy: pip install 'mypy>=1.11', "
                         "then build without isolation (pip wheel --no-build-isolation --no-deps .)") from exc
    here = Path(__file__).resolve().parent
    cwd = Path.cwd()
    os.chdir(here)  # the paths are relative to the project root
    try:
        # without the project's mypy configuration, whose `packages` would make all of kueue_doctor a compile
        # target (`mypy --strict` checks all of it in the tests anyway)
        return list(mypycify(["--config-file=", *compiled_sources(here)], opt_level="3", group_name="kueue_doctor"))
    finally:
        os.chdir(cwd)


setup(ext_modules=extensions())
