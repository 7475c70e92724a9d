"""With KUEUE_DOCTOR_EXPECT_COMPILED=1 (tests/compiled/test_compiled.py), the run stops at once unless the engine it
imports is the mypyc-compiled one: a suite that silently tested the pure source would prove nothing."""

from __future__ import annotations

import os

import pytest


def pytest_sessionstart(session: pytest.Session) -> None:
    if os.environ.get("KUEUE_DOCTOR_EXPECT_COMPILED") != "1":
        return
    from kueue_doctor import state
    from kueue_doctor.engine import diagnose

    for module in (diagnose, state):
        if not (module.__file__ or "").endswith(".so"):
            raise pytest.UsageError(f"KUEUE_DOCTOR_EXPECT_COMPILED=1, but {module.__name__} is {module.__file__}")
